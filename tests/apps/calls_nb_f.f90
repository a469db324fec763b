! The calls of calls_nb.c, in the same order, through the mpif.h-style bindings (`use
! mpi`, integer handles and status arrays), so tests/tracer.rs checks the Fortran layer
! of both MPIs with the C program's expectations. Needs 4 ranks.
program calls_nb_f
  use mpi
  implicit none
  integer :: ierr, r, n, next, prev, i, k, index, outcount, done, bsize
  integer :: counts(4), displs(4), ones(4), idx(4), indices(16)
  integer :: in(64), o(16, 16), battach(256)
  integer :: q(16), p(8), st(MPI_STATUS_SIZE, 16)
  double precision :: d, dout(4)
  logical :: flag

  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, r, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, n, ierr)
  if (n /= 4) call MPI_ABORT(MPI_COMM_WORLD, 1, ierr)
  next = mod(r + 1, 4)
  prev = mod(r + 3, 4)
  do i = 1, 4
    counts(i) = i
    displs(i) = (i - 1) * i / 2
    ones(i) = 1
    idx(i) = i - 1
  end do
  in = 0
  o = 0
  d = r

  ! Sixteen nonblocking collectives.
  call MPI_IBCAST(o(:, 1), 3, MPI_INTEGER, 2, MPI_COMM_WORLD, q(1), ierr)
  call MPI_IREDUCE(d, dout(1), 1, MPI_DOUBLE_PRECISION, MPI_SUM, 1, MPI_COMM_WORLD, q(2), ierr)
  call MPI_IGATHERV(in, r + 1, MPI_INTEGER, o(:, 2), counts, displs, MPI_INTEGER, 0, &
                    MPI_COMM_WORLD, q(3), ierr)
  call MPI_ISCATTERV(in, counts, displs, MPI_INTEGER, o(:, 3), r + 1, MPI_INTEGER, 3, &
                     MPI_COMM_WORLD, q(4), ierr)
  call MPI_IALLGATHERV(in, r + 1, MPI_INTEGER, o(:, 4), counts, displs, MPI_INTEGER, &
                       MPI_COMM_WORLD, q(5), ierr)
  call MPI_IALLTOALLV(in, ones, idx, MPI_INTEGER, o(:, 5), ones, idx, MPI_INTEGER, &
                      MPI_COMM_WORLD, q(6), ierr)
  call MPI_WAITALL(6, q, st, ierr)
  call MPI_IREDUCE_SCATTER(in, o(:, 6), counts, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, q(7), ierr)
  call MPI_IREDUCE_SCATTER_BLOCK(in, o(:, 7), 2, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, q(8), ierr)
  call MPI_ISCAN(d, dout(2), 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, q(9), ierr)
  call MPI_IEXSCAN(d, dout(3), 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, q(10), ierr)
  flag = .false.
  do while (.not. flag)
    call MPI_TESTALL(4, q(7:10), flag, st, ierr)
  end do
  call MPI_IGATHER(in, 2, MPI_INTEGER, o(:, 8), 2, MPI_INTEGER, 1, MPI_COMM_WORLD, q(11), ierr)
  call MPI_ISCATTER(in, 1, MPI_INTEGER, o(:, 9), 1, MPI_INTEGER, 1, MPI_COMM_WORLD, q(12), ierr)
  call MPI_IALLGATHER(in, 1, MPI_INTEGER, o(:, 10), 1, MPI_INTEGER, MPI_COMM_WORLD, q(13), ierr)
  done = 0
  do while (done < 3)
    call MPI_TESTANY(3, q(11:13), index, flag, MPI_STATUS_IGNORE, ierr)
    if (flag .and. index /= MPI_UNDEFINED) done = done + 1
  end do
  call MPI_IALLTOALL(in, 1, MPI_INTEGER, o(:, 11), 1, MPI_INTEGER, MPI_COMM_WORLD, q(14), ierr)
  call MPI_IALLREDUCE(in, o(:, 12), 4, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, q(15), ierr)
  call MPI_IBARRIER(MPI_COMM_WORLD, q(16), ierr)
  done = 0
  do while (done < 3)
    call MPI_TESTSOME(3, q(14:16), outcount, indices, st, ierr)
    if (outcount /= MPI_UNDEFINED) done = done + outcount
  end do
  call MPI_REDUCE_SCATTER_BLOCK(in, o(:, 13), 2, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)

  ! Receives from MPI_ANY_SOURCE: the trace holds the actual source.
  call MPI_ISEND(in, 5, MPI_INTEGER, next, 20, MPI_COMM_WORLD, q(1), ierr)
  call MPI_RECV(o(:, 1), 5, MPI_INTEGER, MPI_ANY_SOURCE, 20, MPI_COMM_WORLD, &
                MPI_STATUS_IGNORE, ierr)
  call MPI_WAIT(q(1), MPI_STATUS_IGNORE, ierr)
  call MPI_ISEND(in, 3, MPI_INTEGER, prev, 21, MPI_COMM_WORLD, q(1), ierr)
  call MPI_PROBE(MPI_ANY_SOURCE, 21, MPI_COMM_WORLD, st(:, 1), ierr)
  call MPI_RECV(o(:, 1), 3, MPI_INTEGER, MPI_ANY_SOURCE, 21, MPI_COMM_WORLD, st(:, 2), ierr)
  if (st(MPI_SOURCE, 1) /= next .or. st(MPI_SOURCE, 2) /= next) &
    call MPI_ABORT(MPI_COMM_WORLD, 2, ierr)
  call MPI_WAIT(q(1), MPI_STATUS_IGNORE, ierr)
  call MPI_SENDRECV(in, 2, MPI_INTEGER, next, 22, o(:, 1), 2, MPI_INTEGER, MPI_ANY_SOURCE, &
                    22, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  if (mod(r, 2) == 0) then
    call MPI_SEND(in, 1, MPI_INTEGER, r + 1, 23, MPI_COMM_WORLD, ierr)
  else
    flag = .false.
    do while (.not. flag)
      call MPI_IPROBE(MPI_ANY_SOURCE, 23, MPI_COMM_WORLD, flag, MPI_STATUS_IGNORE, ierr)
    end do
    call MPI_RECV(o(:, 1), 1, MPI_INTEGER, r - 1, 23, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  end if
  call MPI_IRECV(o(:, 1), 2, MPI_INTEGER, MPI_ANY_SOURCE, 24, MPI_COMM_WORLD, q(1), ierr)
  call MPI_IRECV(o(:, 2), 2, MPI_INTEGER, MPI_ANY_SOURCE, 25, MPI_COMM_WORLD, q(2), ierr)
  call MPI_SEND(in, 2, MPI_INTEGER, next, 24, MPI_COMM_WORLD, ierr)
  call MPI_SEND(in, 2, MPI_INTEGER, prev, 25, MPI_COMM_WORLD, ierr)
  call MPI_WAITANY(2, q, index, MPI_STATUS_IGNORE, ierr)
  call MPI_WAITANY(2, q, index, MPI_STATUS_IGNORE, ierr)
  call MPI_IRECV(o(:, 1), 2, MPI_INTEGER, MPI_ANY_SOURCE, 26, MPI_COMM_WORLD, q(1), ierr)
  call MPI_IRECV(o(:, 2), 2, MPI_INTEGER, MPI_ANY_SOURCE, 27, MPI_COMM_WORLD, q(2), ierr)
  call MPI_SEND(in, 2, MPI_INTEGER, next, 26, MPI_COMM_WORLD, ierr)
  call MPI_SEND(in, 2, MPI_INTEGER, prev, 27, MPI_COMM_WORLD, ierr)
  done = 0
  do while (done < 2)
    call MPI_WAITSOME(2, q, outcount, indices, st, ierr)
    if (outcount /= MPI_UNDEFINED) done = done + outcount
  end do

  ! Persistent requests: each start is recorded as the nonblocking call it starts.
  call MPI_SEND_INIT(in, 4, MPI_INTEGER, next, 30, MPI_COMM_WORLD, p(1), ierr)
  call MPI_RECV_INIT(o(:, 1), 4, MPI_INTEGER, prev, 30, MPI_COMM_WORLD, p(2), ierr)
  do k = 1, 2
    call MPI_STARTALL(2, p, ierr)
    call MPI_WAITALL(2, p, st, ierr)
  end do
  call MPI_SSEND_INIT(in, 2, MPI_INTEGER, next, 31, MPI_COMM_WORLD, p(3), ierr)
  call MPI_RECV_INIT(o(:, 2), 2, MPI_INTEGER, MPI_ANY_SOURCE, 31, MPI_COMM_WORLD, p(4), ierr)
  call MPI_START(p(4), ierr)
  call MPI_START(p(3), ierr)
  call MPI_WAIT(p(3), MPI_STATUS_IGNORE, ierr)
  call MPI_WAIT(p(4), MPI_STATUS_IGNORE, ierr)
  bsize = 1024
  call MPI_BUFFER_ATTACH(battach, bsize, ierr)
  call MPI_BSEND_INIT(in, 1, MPI_INTEGER, next, 32, MPI_COMM_WORLD, p(5), ierr)
  call MPI_RECV_INIT(o(:, 3), 1, MPI_INTEGER, prev, 32, MPI_COMM_WORLD, p(6), ierr)
  call MPI_START(p(6), ierr)
  call MPI_START(p(5), ierr)
  call MPI_WAITALL(2, p(5:6), st, ierr)
  call MPI_BUFFER_DETACH(battach, bsize, ierr)
  call MPI_RSEND_INIT(in, 1, MPI_INTEGER, next, 33, MPI_COMM_WORLD, p(7), ierr)
  call MPI_RECV_INIT(o(:, 4), 1, MPI_INTEGER, prev, 33, MPI_COMM_WORLD, p(8), ierr)
  call MPI_START(p(8), ierr)
  call MPI_BARRIER(MPI_COMM_WORLD, ierr) ! every receive is posted before the ready send
  call MPI_START(p(7), ierr)
  call MPI_WAITALL(2, p(7:8), st, ierr)
  do i = 1, 8
    call MPI_REQUEST_FREE(p(i), ierr)
  end do
  call MPI_FINALIZE(ierr)
end program calls_nb_f
