! The calls of one_sided.c, in the same order, through the `use mpi` bindings, so
! tests/tracer.rs checks the Fortran one-sided and intercommunicator wrappers with the C
! program's expectations. Usage: one_sided_f N_DOUBLES ITERATIONS (N_DOUBLES <= 64).
program one_sided_f
  use mpi
  implicit none
  integer :: ierr, rank, size, n, iters, it, i, right, left, index, win
  integer :: half, inter, merged
  integer(kind=MPI_ADDRESS_KIND) :: wsize, disp
  double precision :: window(64), a(64), b(64), s, total
  character(len=16) :: arg

  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, size, ierr)
  call get_command_argument(1, arg)
  read (arg, *) n
  call get_command_argument(2, arg)
  read (arg, *) iters
  window = 0
  a = 0
  b = 0
  disp = 0
  wsize = 8 * n
  call MPI_WIN_CREATE(window, wsize, 8, MPI_INFO_NULL, MPI_COMM_WORLD, win, ierr)
  call MPI_COMM_SPLIT(MPI_COMM_WORLD, mod(rank, 2), rank, half, ierr)
  call MPI_INTERCOMM_CREATE(half, 0, MPI_COMM_WORLD, 1 - mod(rank, 2), 7, inter, ierr)
  call MPI_COMM_RANK(inter, index, ierr)
  right = mod(rank + 1, size)
  left = mod(rank + size - 1, size)
  total = 0
  do it = 0, iters - 1
    do i = 1, n
      a(i) = a(i) * 0.5d0 + dble(i - 1 + it + rank)
    end do
    call MPI_WIN_FENCE(0, win, ierr)
    call MPI_PUT(a, n, MPI_DOUBLE_PRECISION, right, disp, n, MPI_DOUBLE_PRECISION, win, ierr)
    call MPI_WIN_FENCE(0, win, ierr)
    call MPI_GET(b, n, MPI_DOUBLE_PRECISION, left, disp, n, MPI_DOUBLE_PRECISION, win, ierr)
    call MPI_WIN_FENCE(0, win, ierr)
    s = b(1) + window(1)
    call MPI_ALLREDUCE(s, total, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
    if (mod(rank, 2) == 0) then
      call MPI_SEND(a, n, MPI_DOUBLE_PRECISION, index, 3, inter, ierr)
    else
      call MPI_RECV(b, n, MPI_DOUBLE_PRECISION, index, 3, inter, MPI_STATUS_IGNORE, ierr)
    end if
  end do
  call MPI_INTERCOMM_MERGE(inter, mod(rank, 2) == 1, merged, ierr)
  call MPI_BARRIER(merged, ierr)
  call MPI_BARRIER(MPI_COMM_WORLD, ierr)
  if (rank == 0) print *, 'total=', total
  call MPI_COMM_FREE(merged, ierr)
  call MPI_COMM_FREE(inter, ierr)
  call MPI_COMM_FREE(half, ierr)
  call MPI_WIN_FREE(win, ierr)
  call MPI_FINALIZE(ierr)
end program one_sided_f
