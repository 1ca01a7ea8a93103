# fusor_add_model(<target> MODEL <file> [DB <file>] [TARGET <halide target>] [NAME <c name>]
#                 [SHAPES <input>=<d1>x<d2>... ...] [OPTIONS <extra fusor compile flags>...])
#
# Compiles a model ahead of time at build time (`fusor compile`) and gives <target>: a library
# target to link, carrying the generated header's folder, the Halide runtime and what the model's
# C++ glue needs (libstdc++, libm), so a C-only project links it with no extra flags. The header
# is <NAME>.h (NAME defaults to <target>); its functions are <NAME>_run, <NAME>_run_raw, ...
# SHAPES binds an ONNX model's symbolic input dims (`--shape`). TARGET defaults to the cache
# variable FUSOR_TARGET (default `host`: the building machine's CPU).
#
# Every model compiled for the same Halide target shares one runtime library target
# (fusor_halide_runtime_<hash of the target>), so two models link into one app with one runtime.
#
# FUSOR_EXECUTABLE names the fusor binary: find_package(fusor) sets it to the installed one; the
# fusor source tree sets it to its own build.
include_guard(GLOBAL)

find_package(Threads REQUIRED)
set(FUSOR_TARGET host CACHE STRING "the Halide target fusor_add_model compiles for when a call names none")

function(_fusor_runtime_target halide_target out_var)
    string(MD5 hash "${halide_target}")
    string(SUBSTRING "${hash}" 0 10 hash)
    set(rt fusor_halide_runtime_${hash})
    if (NOT TARGET ${rt})
        set(dir ${CMAKE_BINARY_DIR}/fusor_runtime_${hash})
        add_custom_command(
            OUTPUT ${dir}/libfusor_halide_runtime.a ${dir}/HalideRuntime.h
            COMMAND ${FUSOR_EXECUTABLE} compile --runtime-only --target ${halide_target} -o ${dir}
            DEPENDS ${FUSOR_EXECUTABLE}
            COMMENT "fusor: Halide runtime for ${halide_target}"
            VERBATIM)
        add_custom_target(${rt}_gen DEPENDS ${dir}/libfusor_halide_runtime.a)
        if (TARGET fusor)  # inside fusor's own tree: build the compiler first
            add_dependencies(${rt}_gen fusor)
        endif ()
        add_library(${rt} INTERFACE)
        add_dependencies(${rt} ${rt}_gen)
        target_include_directories(${rt} INTERFACE ${dir})
        target_link_libraries(${rt} INTERFACE ${dir}/libfusor_halide_runtime.a Threads::Threads ${CMAKE_DL_LIBS})
    endif ()
    set(${out_var} ${rt} PARENT_SCOPE)
endfunction()

function(fusor_add_model target)
    cmake_parse_arguments(ARG "" "MODEL;DB;TARGET;NAME" "OPTIONS;SHAPES" ${ARGN})
    if (NOT ARG_MODEL)
        message(FATAL_ERROR "fusor_add_model(${target}): MODEL <file> is required")
    endif ()
    if (NOT FUSOR_EXECUTABLE)
        message(FATAL_ERROR "fusor_add_model(${target}): FUSOR_EXECUTABLE is not set (find_package(fusor) sets it)")
    endif ()
    if (NOT ARG_TARGET)
        set(ARG_TARGET ${FUSOR_TARGET})
    endif ()
    if (NOT ARG_NAME)
        set(ARG_NAME ${target})
    endif ()
    get_filename_component(model ${ARG_MODEL} ABSOLUTE)
    set(dir ${CMAKE_CURRENT_BINARY_DIR}/fusor_${target})
    set(args compile ${model} -o ${dir} --name ${ARG_NAME} --target ${ARG_TARGET} --no-runtime ${ARG_OPTIONS})
    foreach (binding IN LISTS ARG_SHAPES)
        list(APPEND args --shape ${binding})
    endforeach ()
    set(deps ${model} ${FUSOR_EXECUTABLE})
    if (ARG_DB)
        get_filename_component(db ${ARG_DB} ABSOLUTE)
        list(APPEND args --db ${db})
        list(APPEND deps ${db})
    endif ()
    add_custom_command(
        OUTPUT ${dir}/lib${ARG_NAME}.a ${dir}/${ARG_NAME}.h
        COMMAND ${FUSOR_EXECUTABLE} ${args}
        DEPENDS ${deps}
        COMMENT "fusor: compiling ${ARG_MODEL} for ${ARG_TARGET}"
        VERBATIM)
    add_custom_target(${target}_gen DEPENDS ${dir}/lib${ARG_NAME}.a ${dir}/${ARG_NAME}.h)
    if (TARGET fusor)
        add_dependencies(${target}_gen fusor)
    endif ()
    _fusor_runtime_target(${ARG_TARGET} runtime)
    add_library(${target} INTERFACE)
    add_dependencies(${target} ${target}_gen)
    target_include_directories(${target} INTERFACE ${dir})
    target_link_libraries(${target} INTERFACE ${dir}/lib${ARG_NAME}.a ${runtime} stdc++ m)
endfunction()
