! The calls of one_sided_all.c, in the same order, through the `use mpi` bindings, so
! tests/tracer.rs checks every Fortran one-sided wrapper with the C program's
! expectations. Usage: one_sided_all_f N_DOUBLES (N_DOUBLES <= 64).
program one_sided_all_f
  use mpi
  implicit none
  integer :: ierr, rank, size, n, right, left, win, req, world, from, to
  integer(kind=MPI_ADDRESS_KIND) :: bytes, disp, base
  double precision :: a(64), b(64), exposed(64), one, old
  integer(kind=8) :: swap, compare, result
  character(len=16) :: arg

  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, size, ierr)
  call get_command_argument(1, arg)
  read (arg, *) n
  right = mod(rank + 1, size)
  left = mod(rank + size - 1, size)
  a = rank
  b = 0
  exposed = 0
  bytes = 8 * n
  disp = 0

  call MPI_WIN_ALLOCATE(bytes, 8, MPI_INFO_NULL, MPI_COMM_WORLD, base, win, ierr)
  call MPI_BARRIER(MPI_COMM_WORLD, ierr)
  call MPI_WIN_LOCK(MPI_LOCK_EXCLUSIVE, right, 0, win, ierr)
  call MPI_ACCUMULATE(a, n, MPI_DOUBLE_PRECISION, right, disp, n, MPI_DOUBLE_PRECISION, &
                      MPI_SUM, win, ierr)
  call MPI_WIN_FLUSH(right, win, ierr)
  call MPI_WIN_UNLOCK(right, win, ierr)
  call MPI_BARRIER(MPI_COMM_WORLD, ierr)
  call MPI_WIN_LOCK_ALL(0, win, ierr)
  call MPI_RPUT(a, n, MPI_DOUBLE_PRECISION, right, disp, n, MPI_DOUBLE_PRECISION, win, req, ierr)
  call MPI_WAIT(req, MPI_STATUS_IGNORE, ierr)
  call MPI_RGET(b, n, MPI_DOUBLE_PRECISION, left, disp, n, MPI_DOUBLE_PRECISION, win, req, ierr)
  call MPI_WAIT(req, MPI_STATUS_IGNORE, ierr)
  call MPI_GET(b, n, MPI_DOUBLE_PRECISION, left, disp, n, MPI_DOUBLE_PRECISION, win, ierr)
  one = 1
  old = 0
  disp = 1
  call MPI_GET_ACCUMULATE(one, 1, MPI_DOUBLE_PRECISION, old, 1, MPI_DOUBLE_PRECISION, &
                          right, disp, 1, MPI_DOUBLE_PRECISION, MPI_SUM, win, ierr)
  disp = 2
  call MPI_FETCH_AND_OP(one, old, MPI_DOUBLE_PRECISION, right, disp, MPI_SUM, win, ierr)
  swap = 7
  compare = 0
  result = 0
  disp = 3
  call MPI_COMPARE_AND_SWAP(swap, compare, result, MPI_INTEGER8, right, disp, win, ierr)
  disp = 0
  call MPI_WIN_FLUSH_ALL(win, ierr)
  call MPI_WIN_UNLOCK_ALL(win, ierr)
  call MPI_BARRIER(MPI_COMM_WORLD, ierr)
  call MPI_WIN_FREE(win, ierr)

  call MPI_WIN_ALLOCATE_SHARED(bytes, 8, MPI_INFO_NULL, MPI_COMM_WORLD, base, win, ierr)
  call MPI_WIN_FREE(win, ierr)
  call MPI_WIN_CREATE_DYNAMIC(MPI_INFO_NULL, MPI_COMM_WORLD, win, ierr)
  call MPI_WIN_FREE(win, ierr)

  call MPI_WIN_CREATE(exposed, bytes, 8, MPI_INFO_NULL, MPI_COMM_WORLD, win, ierr)
  call MPI_COMM_GROUP(MPI_COMM_WORLD, world, ierr)
  call MPI_GROUP_INCL(world, 1, [left], from, ierr)
  call MPI_GROUP_INCL(world, 1, [right], to, ierr)
  call MPI_WIN_POST(from, 0, win, ierr)
  call MPI_WIN_START(to, 0, win, ierr)
  call MPI_PUT(a, n, MPI_DOUBLE_PRECISION, right, disp, n, MPI_DOUBLE_PRECISION, win, ierr)
  call MPI_WIN_COMPLETE(win, ierr)
  call MPI_WIN_WAIT(win, ierr)
  call MPI_BARRIER(MPI_COMM_WORLD, ierr)
  call MPI_WIN_FREE(win, ierr)
  if (rank == 0) print *, 'old=', old, ' result=', result, ' exposed=', exposed(1)
  call MPI_GROUP_FREE(from, ierr)
  call MPI_GROUP_FREE(to, ierr)
  call MPI_GROUP_FREE(world, ierr)
  call MPI_FINALIZE(ierr)
end program one_sided_all_f
