/*
 * no_mpi.c - src/distribute/mpi.c as a build without MPI compiles it (no
 * SY_HAVE_MPI: every MPI spec refused as not built in), for the command
 * built as systolic_no_mpi (CMakeLists.txt), which the tests run to check
 * what --tpu mpi says where Open MPI was not found or -DSY_MPI=OFF.
 */
#include "distribute/mpi.c"
