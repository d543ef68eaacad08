# run_cli.cmake - runs one command-line test (sy_cli_test in
# tests/CMakeLists.txt) and passes it only if all of these hold:
#
#   1. the command exits with exactly STATUS (0 success, 1 failure, 2 usage
#      error: src/cli/main.c);
#   2. its stdout and stderr together, in the order written, match EXPECT,
#      a CMake regular expression (the engine of PASS_REGULAR_EXPRESSION, so
#      `.` crosses lines and `^` is the start of the output);
#   3. the output holds no sanitizer report. ASan and TSan reports change the
#      exit status, but a report after the expected line would pass a test
#      that checks its output alone, and UBSan's `runtime error:` does not
#      change it unless told to halt.
#
# CTest's PASS_REGULAR_EXPRESSION, by contrast, replaces the exit status
# check: a run that printed the expected line and then leaked passed. With
# SKIP_STATUS, a command that exits with it (77, the tests' "skipped") is
# reported as skipped (the test's SKIP_REGULAR_EXPRESSION matches the line
# printed here); with DATASET, the test is skipped unless
# $SYSTOLIC_DATASETS/DATASET exists (IMDB's archive has no public download).
#
#   cmake -DSTATUS=0 -DEXPECT=regex [-DSKIP_STATUS=77] [-DDATASET=path]
#         -P tests/run_cli.cmake -- command [args...]

set(cmd)
set(after_dashes FALSE)
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE ${last})
  if(after_dashes)
    string(REPLACE ";" "\\;" arg "${CMAKE_ARGV${i}}") # one argument, though it holds a ;
    list(APPEND cmd "${arg}")
  elseif("${CMAKE_ARGV${i}}" STREQUAL "--")
    set(after_dashes TRUE)
  endif()
endforeach()
if(NOT cmd OR NOT DEFINED STATUS)
  message(FATAL_ERROR "usage: cmake -DSTATUS=n [-DEXPECT=regex] -P run_cli.cmake -- command [args...]")
endif()

if(DATASET AND NOT EXISTS "$ENV{SYSTOLIC_DATASETS}/${DATASET}")
  message("run_cli: skipped: no ${DATASET} in \$SYSTOLIC_DATASETS ('$ENV{SYSTOLIC_DATASETS}')")
  return()
endif()

execute_process(COMMAND ${cmd} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE out)
# The output as the command wrote it, for --output-on-failure and -V.
execute_process(COMMAND ${CMAKE_COMMAND} -E echo_append "${out}")

if(DEFINED SKIP_STATUS AND "${status}" STREQUAL "${SKIP_STATUS}")
  string(STRIP "${out}" why) # the command's last line says why
  string(REGEX REPLACE ".*\n" "" why "${why}")
  message("run_cli: skipped (exit status ${status}): ${why}")
  return()
endif()
set(problems)
if(NOT "${status}" STREQUAL "${STATUS}")
  list(APPEND problems "exit status ${status}, expected ${STATUS}")
endif()
if(DEFINED EXPECT AND NOT "${out}" MATCHES "${EXPECT}")
  list(APPEND problems "the output does not match: ${EXPECT}")
endif()
foreach(report "ERROR: AddressSanitizer" "ERROR: LeakSanitizer" "runtime error:" "WARNING: ThreadSanitizer"
               "SUMMARY: UndefinedBehaviorSanitizer")
  string(FIND "${out}" "${report}" at)
  if(at GREATER -1)
    list(APPEND problems "a sanitizer report: ${report}")
  endif()
endforeach()
if(problems)
  list(JOIN problems "\n  " problems)
  message(FATAL_ERROR "run_cli: FAILED:\n  ${problems}")
endif()
message("run_cli: exit status ${status} as expected, output as expected")
