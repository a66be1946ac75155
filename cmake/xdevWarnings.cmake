# xdev_target_warnings(<target>): the warning flags of xdev's own targets (never of consumers).
function(xdev_target_warnings target)
  # C++ only: a target with CUDA sources passes its .cu files to nvcc, which has flags of its own.
  target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:-Wall;-Wextra;-Wpedantic>")
  if(XDEV_WERROR)
    target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:-Werror>")
  endif()
endfunction()
