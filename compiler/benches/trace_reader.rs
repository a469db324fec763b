//! Reader throughput: takes a synthetic rank file of one million events (a mix of
//! point-to-point, nonblocking, wait and collective records, encoded as the C tracer
//! encodes them, in blocks of 1 MiB each closed by its checksum record, as the tracer
//! flushes its buffer), gives events per second of `RankReader::next_event`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use perfskel_compiler::trace::format::{self, field, Op};
use perfskel_compiler::trace::{Event, RankReader};

const N_EVENTS: u64 = 1_000_000;

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn synthetic_rank_file() -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(format::MAGIC);
    b.extend_from_slice(&format::VERSION.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    for v in [0u32, 4, 1] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b.extend_from_slice(&0u64.to_le_bytes());
    b.extend_from_slice(&[0, 0, 0, 0]);
    let len = (b.len() as u16).to_le_bytes();
    b[10..12].copy_from_slice(&len);
    for site in 1..=4u64 {
        b.push(format::R_SITE);
        varint(&mut b, site);
        varint(&mut b, 0);
        varint(&mut b, 0x5555_0000 + site * 16);
    }
    let mut req = 0;
    let mut block_from = 0;
    let checksum = |b: &mut Vec<u8>, from: &mut usize| {
        b.push(format::R_CHECKSUM);
        let crc = crc32fast::hash(&b[*from..]);
        b.extend_from_slice(&crc.to_le_bytes());
        *from = b.len();
    };
    for i in 0..N_EVENTS {
        if b.len() - block_from >= 1 << 20 {
            checksum(&mut b, &mut block_from);
        }
        let (op, fields): (Op, Vec<(u64, u64)>) = match i % 4 {
            0 => {
                req += 1;
                (
                    Op::Irecv,
                    vec![
                        (field::PEER, 2),
                        (field::TAG, 0),
                        (field::BYTES, 8192),
                        (field::COMM, 0),
                        (field::REQ, req),
                    ],
                )
            }
            1 => {
                req += 1;
                (
                    Op::Isend,
                    vec![
                        (field::PEER, 4),
                        (field::TAG, 0),
                        (field::BYTES, 8192),
                        (field::COMM, 0),
                        (field::REQ, req),
                    ],
                )
            }
            2 => (Op::Waitall, vec![(field::REQS, 2)]),
            _ => (
                Op::Allreduce,
                vec![(field::BYTES, 8), (field::COMM, 0), (field::RBYTES, 8)],
            ),
        };
        b.push(op.code());
        varint(&mut b, fields.iter().fold(0, |m, (bit, _)| m | bit));
        varint(&mut b, 1500 + i % 700);
        varint(&mut b, 300 + i % 5000);
        varint(&mut b, i % 4 + 1);
        for (bit, v) in fields {
            varint(&mut b, v);
            if bit == field::REQS {
                varint(&mut b, req - 1);
                varint(&mut b, req);
            }
        }
    }
    b.push(format::R_END);
    varint(&mut b, 1 << 40);
    varint(&mut b, N_EVENTS);
    checksum(&mut b, &mut block_from);
    b
}

fn read_all(bytes: &[u8]) -> u64 {
    let mut reader = match RankReader::new(bytes, Some(0)) {
        Ok(r) => r,
        Err(e) => panic!("synthetic trace: {e}"),
    };
    let mut ev = Event::default();
    let mut total = 0u64;
    while let Ok(true) = reader.next_event(&mut ev) {
        total = total.wrapping_add(ev.bytes.unwrap_or(0));
    }
    assert!(
        matches!(
            reader.completion(),
            Some(perfskel_compiler::trace::Completion::Complete { .. })
        ),
        "the synthetic file reads to its end: {:?}",
        reader.completion()
    );
    total
}

fn bench_reader(c: &mut Criterion) {
    let bytes = synthetic_rank_file();
    eprintln!(
        "synthetic rank file: {N_EVENTS} events, {} bytes, {:.2} bytes/event",
        bytes.len(),
        bytes.len() as f64 / N_EVENTS as f64
    );
    let mut group = c.benchmark_group("trace_reader");
    group.throughput(Throughput::Elements(N_EVENTS));
    group.sample_size(10);
    group.bench_function("next_event", |b| b.iter(|| read_all(&bytes)));
    group.finish();
}

criterion_group!(benches, bench_reader);
criterion_main!(benches);
