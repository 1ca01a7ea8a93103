set terminal pngcairo size 900,500 noenhanced
set output 'docs/bench/results.png'
set title 'fusor: median ms, log scale (label: fused vs unfused speedup)'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set logscale y
set ylabel 'ms'
set xtics rotate by -20
set key top right
plot 'docs/bench/results.dat' using 2:xtic(1) title 'unfused', '' using 3 title 'fused', '' using 5 title 'optimized, NCHW', '' using 6 title 'optimized, NHWC', '' using ($0-0.1):3:(sprintf('%.2fx',$4)) with labels offset 0,1 notitle
