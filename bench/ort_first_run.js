#!/usr/bin/env node
// ONNX Runtime's start, the anchor of bench/cold_start.sh: creates a session for MODEL and runs it
// once on random inputs; prints one line of JSON with the session and first-run times in ms. With
// RUNS=N in the environment it then runs N more times and adds their median (median_ms), the
// steady-state anchor of bench/conv_algo.sh.
//
//   NODE_PATH=DIR/node_modules [RUNS=N] node bench/ort_first_run.js MODEL THREADS [NAME=D1xD2x...]...
//
// onnxruntime-node comes from npm (`npm install onnxruntime-node@1.30` in DIR; its CUDA download
// may be skipped: --onnxruntime-node-install-cuda=skip).
const ort = require('onnxruntime-node');

async function main() {
    const [model, threads, ...bindings] = process.argv.slice(2);
    if (!model || !threads) {
        console.error('usage: ort_first_run.js MODEL THREADS [NAME=D1xD2...]...');
        process.exit(2);
    }
    const shapes = {};
    for (const b of bindings) {
        const [name, dims] = b.split('=');
        shapes[name] = dims.split('x').map(Number);
    }
    const t0 = process.hrtime.bigint();
    const session = await ort.InferenceSession.create(model, {intraOpNumThreads: Number(threads), interOpNumThreads: 1});
    const t1 = process.hrtime.bigint();
    const feeds = {};
    for (const name of session.inputNames) {
        const dims = shapes[name];
        if (!dims) {
            console.error(`ort_first_run.js: no shape for input '${name}'`);
            process.exit(2);
        }
        const data = new Float32Array(dims.reduce((a, b) => a * b, 1)).map(() => Math.random() * 2 - 1);
        feeds[name] = new ort.Tensor('float32', data, dims);
    }
    await session.run(feeds);
    const t2 = process.hrtime.bigint();
    const out = {session_ms: Number(t1 - t0) / 1e6, first_run_ms: Number(t2 - t1) / 1e6};
    const runs = Number(process.env.RUNS || 0);
    if (runs > 0) {
        const ms = [];
        for (let i = 0; i < runs; i++) {
            const a = process.hrtime.bigint();
            await session.run(feeds);
            ms.push(Number(process.hrtime.bigint() - a) / 1e6);
        }
        ms.sort((a, b) => a - b);
        out.median_ms = runs % 2 ? ms[(runs - 1) / 2] : (ms[runs / 2 - 1] + ms[runs / 2]) / 2;
    }
    console.log(JSON.stringify(out));
}

main();
