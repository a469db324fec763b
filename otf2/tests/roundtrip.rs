//! An archive written through the library reads back as written, `otf2-print` (the
//! reference tool, Debian's otf2-tools) reads it, and damaged archives are errors.

use perfskel_otf2::{
    attribute_ids, collective_op, read_definitions, Attr, Def, Ev, EvKind, Events, GroupKind,
    Writer, UNDEFINED_U64,
};
use std::path::Path;

fn defs() -> Vec<Def> {
    let mut d = vec![Def::Clock {
        resolution: 1_000_000_000,
        offset: 0,
        length: 5000,
        realtime: 0,
    }];
    for (id, text) in [
        (0, ""),
        (1, "MPI_Send"),
        (2, "MPI_Recv"),
        (3, "MPI_Allreduce"),
        (4, "node"),
        (5, "rank 0"),
        (6, "rank 1"),
        (7, "MPI_COMM_WORLD"),
        (8, Attr::OffCpu.name()),
    ] {
        d.push(Def::String {
            id,
            text: text.into(),
        });
    }
    d.push(Def::Attribute {
        id: 0,
        name: 8,
        uint64: true,
    });
    for (id, name) in [(0, 1), (1, 2), (2, 3)] {
        d.push(Def::Region {
            id,
            name,
            canonical: name,
            mpi: true,
            file: 0,
            line: 0,
        });
    }
    d.push(Def::SystemTreeNode {
        id: 0,
        name: 4,
        class: 4,
        parent: UNDEFINED_U64,
    });
    for r in 0..2u64 {
        d.push(Def::LocationGroup {
            id: r,
            name: 5 + r,
            process: true,
            parent: 0,
        });
        d.push(Def::Location {
            id: r,
            name: 5 + r,
            cpu_thread: true,
            events: 0,
            group: r,
        });
    }
    d.push(Def::Group {
        id: 0,
        name: 0,
        kind: GroupKind::CommLocations,
        mpi: true,
        members: vec![0, 1],
    });
    d.push(Def::Group {
        id: 1,
        name: 0,
        kind: GroupKind::CommGroup,
        mpi: true,
        members: vec![0, 1],
    });
    d.push(Def::Comm {
        id: 0,
        name: 7,
        group: 1,
        parent: UNDEFINED_U64,
    });
    d
}

fn events(rank: u32) -> Vec<Ev> {
    let other = 1 - rank;
    let allreduce = collective_op("MPI_Allreduce").expect("a collective");
    let p2p = if rank == 0 {
        vec![
            Ev::new(100, EvKind::Enter { region: 0 }).with(Attr::OffCpu, 7),
            Ev::new(
                110,
                EvKind::Send {
                    peer: other,
                    comm: 0,
                    tag: 5,
                    bytes: 4096,
                },
            ),
            Ev::new(200, EvKind::Leave { region: 0 }),
        ]
    } else {
        vec![
            Ev::new(100, EvKind::Enter { region: 1 }),
            Ev::new(
                290,
                EvKind::Recv {
                    peer: other,
                    comm: 0,
                    tag: 5,
                    bytes: 4096,
                },
            ),
            Ev::new(300, EvKind::Leave { region: 1 }),
        ]
    };
    let mut all = p2p;
    all.extend([
        Ev::new(400, EvKind::Enter { region: 2 }),
        Ev::new(401, EvKind::CollectiveBegin),
        Ev::new(
            450,
            EvKind::CollectiveEnd {
                op: allreduce,
                comm: 0,
                root: u32::MAX,
                sent: 8,
                received: 8,
            },
        ),
        Ev::new(451, EvKind::Leave { region: 2 }),
    ]);
    all
}

fn write(dir: &Path) {
    let mut ids = [UNDEFINED_U64; perfskel_otf2::N_ATTRS];
    ids[Attr::OffCpu as usize] = 0;
    let mut w = Writer::create(dir, "traces", &ids).expect("create");
    for rank in 0..2 {
        for ev in events(rank) {
            w.event(rank as u64, &ev).expect("event");
        }
    }
    for d in defs() {
        w.definition(&d).expect("definition");
    }
    w.finish().expect("finish");
}

#[test]
fn an_archive_reads_back_as_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path());
    let anchor = dir.path().join("traces.otf2");
    let read = read_definitions(&anchor).expect("definitions");
    // Locations count their events.
    let mut want = defs();
    for d in &mut want {
        if let Def::Location { events, .. } = d {
            *events = 7;
        }
    }
    assert_eq!(read, want);
    let ids = attribute_ids(&read);
    assert_eq!(ids[Attr::OffCpu as usize], 0);
    assert_eq!(ids[Attr::Polls as usize], UNDEFINED_U64);
    for rank in 0..2u32 {
        let mut evs = Events::open(&anchor, rank as u64, &ids).expect("open");
        let mut got = Vec::new();
        while let Some(e) = evs.next_event().expect("event") {
            got.push(e);
        }
        assert_eq!(got, events(rank), "rank {rank}");
    }
}

#[test]
fn otf2_print_reads_what_is_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path());
    let out = std::process::Command::new("otf2-print")
        .arg(dir.path().join("traces.otf2"))
        .output()
        .expect("otf2-print (Debian's otf2-tools) runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for needle in [
        "MPI_SEND",
        "MPI_RECV",
        "MPI_COLLECTIVE_END",
        "\"MPI_Allreduce\"",
    ] {
        assert!(text.contains(needle), "{needle} in\n{text}");
    }
    assert_eq!(text.matches("ENTER").count(), 4, "{text}");
}

#[test]
fn damaged_archives_are_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = read_definitions(&dir.path().join("nothing.otf2")).expect_err("no archive");
    assert!(!missing.message.is_empty());
    write(dir.path());
    let anchor = dir.path().join("traces.otf2");
    // An event file cut anywhere: the events before the cut, then an error, never a
    // crash, never a clean end short of the location's count.
    let evt = dir.path().join("traces").join("0.evt");
    let bytes = std::fs::read(&evt).expect("event file");
    let defs = read_definitions(&anchor).expect("definitions");
    let ids = attribute_ids(&defs);
    let count = defs
        .iter()
        .find_map(|d| match d {
            Def::Location { id: 0, events, .. } => Some(*events),
            _ => None,
        })
        .expect("location 0");
    for cut in 0..bytes.len() {
        std::fs::write(&evt, &bytes[..cut]).expect("truncate");
        let mut n = 0;
        let result = Events::open(&anchor, 0, &ids).and_then(|e| {
            let mut e = e.expecting(count);
            while e.next_event()?.is_some() {
                n += 1;
            }
            Ok(())
        });
        // Every record before the cut is read; a cut that loses one is an error (a cut
        // in the end-of-file padding loses nothing and may read clean).
        match result {
            Ok(()) => assert_eq!(n, count, "the event file cut at {cut} of {}", bytes.len()),
            Err(e) => {
                assert!(!e.message.is_empty());
                assert!(n <= count, "cut at {cut}: {n} events");
            }
        }
    }
    std::fs::write(&evt, &bytes).expect("restore");
    // A garbage anchor file.
    std::fs::write(&anchor, b"not an anchor\n").expect("write");
    assert!(read_definitions(&anchor).is_err());
}

#[test]
fn a_location_the_archive_does_not_have_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path());
    let anchor = dir.path().join("traces.otf2");
    let ids = attribute_ids(&read_definitions(&anchor).expect("definitions"));
    let result = Events::open(&anchor, 99, &ids).and_then(|mut e| {
        while e.next_event()?.is_some() {}
        Ok(())
    });
    assert!(result.is_err(), "{result:?}");
}

/// Score-P's unwinding mode: source code locations, a calling-context tree, and regions
/// entered and left through it read back as written.
#[test]
fn calling_contexts_read_back_as_written() {
    let mut d = defs();
    d.extend([
        Def::String {
            id: 9,
            text: "main".into(),
        },
        Def::String {
            id: 10,
            text: "app.c".into(),
        },
        Def::Region {
            id: 3,
            name: 9,
            canonical: 9,
            mpi: false,
            file: 10,
            line: 10,
        },
        Def::SourceCodeLocation {
            id: 0,
            file: 10,
            line: 42,
        },
        Def::CallingContext {
            id: 0,
            region: 3,
            source_code_location: 0,
            parent: UNDEFINED_U64,
        },
        Def::CallingContext {
            id: 1,
            region: 0,
            source_code_location: UNDEFINED_U64,
            parent: 0,
        },
    ]);
    let evs = vec![
        Ev::new(
            100,
            EvKind::CallingContextEnter {
                context: 1,
                unwind_distance: 2,
            },
        ),
        Ev::new(
            110,
            EvKind::Send {
                peer: 1,
                comm: 0,
                tag: 5,
                bytes: 8,
            },
        ),
        Ev::new(200, EvKind::CallingContextLeave { context: 1 }),
    ];
    let dir = tempfile::tempdir().expect("tempdir");
    let ids = [UNDEFINED_U64; perfskel_otf2::N_ATTRS];
    let mut w = Writer::create(dir.path(), "traces", &ids).expect("create");
    for rank in 0..2u64 {
        for ev in &evs {
            w.event(rank, ev).expect("event");
        }
    }
    for def in &d {
        w.definition(def).expect("definition");
    }
    w.finish().expect("finish");
    let anchor = dir.path().join("traces.otf2");
    let read = read_definitions(&anchor).expect("definitions");
    for def in &d[d.len() - 3..] {
        assert!(read.contains(def), "{def:?} in {read:?}");
    }
    let ids = attribute_ids(&read);
    let mut e = Events::open(&anchor, 0, &ids).expect("open");
    let mut got = Vec::new();
    while let Some(ev) = e.next_event().expect("event") {
        got.push(ev);
    }
    assert_eq!(got, evs);
}
