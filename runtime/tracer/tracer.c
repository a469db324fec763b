/* perfskel PMPI tracer (LD_PRELOAD): takes an MPI application's C and Fortran MPI calls,
 * gives one binary event file per rank in $PERFSKEL_TRACE_DIR (format: FORMAT.md).
 * Built by `perfskel record` with the mpicc of the MPI the job runs on. */
#include "core.inc"
#include "wrap_c.inc"
#include "wrap_f.inc"
#include "wrap_f_nb.inc"
