! The calls of cancel_grid.c, in the same order, through the `use mpi` bindings, so
! tests/skeletonize.rs checks the Fortran MPI_Cancel and MPI_Cart_create wrappers with
! the C program's expectations. Usage: cancel_grid_f N_DOUBLES ITERATIONS (N <= 256).
program cancel_grid_f
  use mpi
  implicit none
  integer :: ierr, size, n, iters, it, d, grid, pending, flag, all_cancelled
  integer :: dims(2), nb(2, 2), st(MPI_STATUS_SIZE)
  logical :: periods(2), cancelled
  double precision :: out(256), in(256), never(4), x, total
  character(len=16) :: arg

  call MPI_INIT(ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, size, ierr)
  call get_command_argument(1, arg)
  read (arg, *) n
  call get_command_argument(2, arg)
  read (arg, *) iters
  dims = 0
  periods = (/ .true., .false. /)
  call MPI_DIMS_CREATE(size, 2, dims, ierr)
  call MPI_CART_CREATE(MPI_COMM_WORLD, 2, dims, periods, .false., grid, ierr)
  call MPI_CART_SHIFT(grid, 0, 1, nb(1, 1), nb(1, 2), ierr)
  call MPI_CART_SHIFT(grid, 1, 1, nb(2, 1), nb(2, 2), ierr)
  out = 0
  in = 0
  all_cancelled = 1
  do it = 0, iters - 1
    call MPI_IRECV(never, 4, MPI_DOUBLE_PRECISION, MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &
                   pending, ierr)
    do d = 1, 2
      call MPI_SENDRECV(out, n, MPI_DOUBLE_PRECISION, nb(d, 2), d - 1, in, n, &
                        MPI_DOUBLE_PRECISION, nb(d, 1), d - 1, grid, MPI_STATUS_IGNORE, ierr)
      call MPI_SENDRECV(out, n, MPI_DOUBLE_PRECISION, nb(d, 1), d + 1, in, n, &
                        MPI_DOUBLE_PRECISION, nb(d, 2), d + 1, grid, MPI_STATUS_IGNORE, ierr)
    end do
    x = dble(it)
    call MPI_ALLREDUCE(x, total, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
    call MPI_CANCEL(pending, ierr)
    call MPI_WAIT(pending, st, ierr)
    call MPI_TEST_CANCELLED(st, cancelled, ierr)
    flag = 0
    if (cancelled) flag = 1
    all_cancelled = min(all_cancelled, flag)
  end do
  if (all_cancelled == 0) print *, 'cancel_grid_f: a receive was not cancelled'
  call MPI_COMM_FREE(grid, ierr)
  call MPI_FINALIZE(ierr)
end program cancel_grid_f
