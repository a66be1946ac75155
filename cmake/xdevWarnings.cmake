# xdev_target_warnings(<target>): the warning flags of xdev's own targets (never of consumers).
function(xdev_target_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic)
  if(XDEV_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
