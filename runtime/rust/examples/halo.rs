//! A skeleton written by hand with the DSL: a 2-D halo exchange on a periodic grid of
//! any size, with a residual every few iterations and a row-wise reduction at the end.
//!
//! ```sh
//! cargo build --release --example halo -p perfskel-runtime
//! mpirun -np 4 target/release/examples/halo
//! ```

use perfskel_runtime::prelude::*;

fn main() {
    // The grid is the most square factorization of the rank count, so the example runs
    // on any number of ranks.
    let n_ranks = std::env::var("OMPI_COMM_WORLD_SIZE")
        .or_else(|_| std::env::var("PMI_SIZE"))
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(1);
    let rows = (1..=n_ranks)
        .filter(|r| n_ranks.is_multiple_of(*r) && r * r <= n_ranks)
        .max()
        .unwrap_or(1);
    let mut sk = Skeleton::builder("halo", Topology::torus(&[rows, n_ranks / rows]))
        .app_time(secs(0.5))
        .working_sets(&[mib(1)])
        .buffers(kib(16))
        .init();

    // Request handles live as long as the skeleton, like the DSL's `req` names.
    let recv_west = sk.request("recv_west");
    let recv_east = sk.request("recv_east");
    let send_east = sk.request("send_east");
    let send_west = sk.request("send_west");
    let row = sk.cart_sub("row", WORLD, &[1]);

    while sk.pass() {
        for step in 0..50 {
            // Interior update: 4 ms over a 1 MiB block, a little longer on odd ranks.
            let time = if sk.rank() % 2 == 1 { ms(4.4) } else { ms(4.0) };
            sk.compute(time).working_set(mib(1)).run();

            // Halo exchange along x, then a blocking exchange along y.
            sk.irecv(WEST, kib(8)).tag(1).start(recv_west);
            sk.irecv(EAST, kib(8)).tag(2).start(recv_east);
            sk.isend(EAST, kib(8)).tag(1).start(send_east);
            sk.isend(WEST, kib(8)).tag(2).start(send_west);
            sk.waitall(&[recv_west, recv_east, send_east, send_west]);
            sk.sendrecv(NORTH, kib(8), SOUTH, kib(8)).tag(3).run();

            if step % 10 == 9 {
                sk.allreduce(bytes(8)).run(); // the residual
            }
        }
        sk.allreduce(kib(1)).on(row).run();
    }
    sk.finish();
}
