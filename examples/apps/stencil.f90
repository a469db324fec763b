! 2D Jacobi stencil in Fortran 2008 (`use mpi_f08`): a process grid from MPI_Cart_create
! (non-periodic, so border neighbours are MPI_PROC_NULL), four MPI_Sendrecv halo
! exchanges and one MPI_Allreduce of the residual per iteration — the same pattern as
! stencil.c.  Usage: stencil_f N ITERS   (N x N points per rank)
program stencil_f
  use mpi_f08
  implicit none
  type(MPI_Comm) :: grid
  integer :: nprocs, rank, n, iters, it, i, j, north, south, west, east
  integer :: dims(2)
  logical :: periods(2)
  character(len=32) :: arg
  double precision, allocatable :: u(:, :), v(:, :), sendcol(:), recvcol(:)
  double precision :: local, residual, d

  call MPI_Init()
  n = 64
  iters = 10
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read (arg, *) n
  end if
  if (command_argument_count() >= 2) then
    call get_command_argument(2, arg)
    read (arg, *) iters
  end if
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs)
  dims = 0
  periods = .false.
  call MPI_Dims_create(nprocs, 2, dims)
  call MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, .false., grid)
  call MPI_Cart_shift(grid, 0, 1, north, south)
  call MPI_Cart_shift(grid, 1, 1, west, east)

  ! u(i, j): i is the row (north-south), j the column; row halos are strided here,
  ! column halos contiguous, so rows are packed.
  allocate (u(0:n + 1, 0:n + 1), v(0:n + 1, 0:n + 1), sendcol(n), recvcol(n))
  u = 0d0
  v = 0d0
  do j = 1, n
    do i = 1, n
      u(i, j) = dble(mod(i * 7 + j * 13, 17))
    end do
  end do
  residual = 0d0
  do it = 1, iters
    sendcol = u(1, 1:n)
    call MPI_Sendrecv(sendcol, n, MPI_DOUBLE_PRECISION, north, 0, recvcol, n, &
                      MPI_DOUBLE_PRECISION, south, 0, grid, MPI_STATUS_IGNORE)
    if (south /= MPI_PROC_NULL) u(n + 1, 1:n) = recvcol
    sendcol = u(n, 1:n)
    call MPI_Sendrecv(sendcol, n, MPI_DOUBLE_PRECISION, south, 1, recvcol, n, &
                      MPI_DOUBLE_PRECISION, north, 1, grid, MPI_STATUS_IGNORE)
    if (north /= MPI_PROC_NULL) u(0, 1:n) = recvcol
    call MPI_Sendrecv(u(1:n, 1), n, MPI_DOUBLE_PRECISION, west, 2, u(1:n, n + 1), n, &
                      MPI_DOUBLE_PRECISION, east, 2, grid, MPI_STATUS_IGNORE)
    call MPI_Sendrecv(u(1:n, n), n, MPI_DOUBLE_PRECISION, east, 3, u(1:n, 0), n, &
                      MPI_DOUBLE_PRECISION, west, 3, grid, MPI_STATUS_IGNORE)
    local = 0d0
    do j = 1, n
      do i = 1, n
        v(i, j) = 0.25d0 * (u(i - 1, j) + u(i + 1, j) + u(i, j - 1) + u(i, j + 1))
        d = v(i, j) - u(i, j)
        local = local + d * d
      end do
    end do
    u = v
    call MPI_Allreduce(local, residual, 1, MPI_DOUBLE_PRECISION, MPI_SUM, grid)
  end do
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  if (rank == 0) print '(a, es12.6)', 'stencil_f: residual ', residual
  deallocate (u, v, sendcol, recvcol)
  call MPI_Comm_free(grid)
  call MPI_Finalize()
end program stencil_f
