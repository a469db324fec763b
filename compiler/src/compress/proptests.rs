//! Property tests of loop discovery: random and structured token sequences → checks that
//! both algorithms are lossless, that exact is never longer than greedy or the reference,
//! and that greedy finds every loop of a clean nest but for at most two iterations.

use super::{description_len, discover, expand, reference, Algorithm, Node};
use proptest::prelude::*;

/// A loop-nest shape: `Calls(n)` is `n` distinct calls, `Loop` repeats its body.
#[derive(Clone, Debug)]
enum Shape {
    Calls(usize),
    Loop(u64, Vec<Shape>),
}

fn shape() -> impl Strategy<Value = Vec<Shape>> {
    let leaf = (1usize..4).prop_map(Shape::Calls);
    let tree = leaf.prop_recursive(3, 24, 4, |inner| {
        (2u64..7, prop::collection::vec(inner, 1..4)).prop_map(|(count, mut body)| {
            // A body always has a call of its own, so that it is never a single loop
            // (which would fold into one loop with the product of the counts).
            body.insert(0, Shape::Calls(1));
            Shape::Loop(count, body)
        })
    });
    prop::collection::vec(tree, 1..4)
}

/// Turns a shape into a nest with a fresh token per call (a "clean" nest: no repeats but
/// its loops).
fn build(shapes: &[Shape], next: &mut u32) -> Vec<Node> {
    let mut nest = Vec::new();
    for shape in shapes {
        match shape {
            Shape::Calls(n) => {
                for _ in 0..*n {
                    nest.push(Node::Token(*next));
                    *next += 1;
                }
            }
            Shape::Loop(count, body) => nest.push(Node::Loop {
                count: *count,
                body: build(body, next),
            }),
        }
    }
    nest
}

/// Every loop of a nest: its one-iteration expansion and its count.
fn loops_of(nest: &[Node], out: &mut Vec<(Vec<u32>, u64)>) {
    for node in nest {
        if let Node::Loop { count, body } = node {
            out.push((expand(body), *count));
            loops_of(body, out);
        }
    }
}

fn check_lossless(tokens: &[u32]) -> Result<(usize, usize), TestCaseError> {
    let exact = discover(tokens, Algorithm::Exact);
    let greedy = discover(tokens, Algorithm::Greedy);
    prop_assert_eq!(&expand(&exact), tokens);
    prop_assert_eq!(&expand(&greedy), tokens);
    let (exact_len, greedy_len) = (description_len(&exact), description_len(&greedy));
    prop_assert!(
        exact_len <= greedy_len,
        "exact {exact:?}\ngreedy {greedy:?}"
    );
    Ok((exact_len, greedy_len))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_sequences_round_trip(tokens in prop::collection::vec(0u32..3, 0..300)) {
        check_lossless(&tokens)?;
    }

    #[test]
    fn structured_sequences_round_trip_and_exact_is_shortest(shapes in shape()) {
        let nest = build(&shapes, &mut 0);
        let tokens = expand(&nest);
        let (exact_len, _) = check_lossless(&tokens)?;
        // The generated nest is a valid description, so the best one is no longer.
        prop_assert!(exact_len <= description_len(&nest));
        if tokens.len() <= 600 {
            prop_assert!(exact_len <= description_len(&reference(&tokens)));
        }
    }

    #[test]
    fn noisy_structured_sequences_round_trip(
        shapes in shape(),
        noise in prop::collection::vec((any::<prop::sample::Index>(), 1000u32..1003), 0..6),
    ) {
        let mut tokens = expand(&build(&shapes, &mut 0));
        for (at, token) in noise {
            let at = at.index(tokens.len() + 1);
            tokens.insert(at, token);
        }
        let (exact_len, _) = check_lossless(&tokens)?;
        if tokens.len() <= 600 {
            prop_assert!(exact_len <= description_len(&reference(&tokens)));
        }
    }

    #[test]
    fn greedy_misses_at_most_two_iterations(shapes in shape()) {
        let nest = build(&shapes, &mut 0);
        let tokens = expand(&nest);
        let greedy = discover(&tokens, Algorithm::Greedy);
        let mut wanted = Vec::new();
        loops_of(&nest, &mut wanted);
        let mut found = Vec::new();
        loops_of(&greedy, &mut found);
        for (body, count) in wanted {
            if count <= 2 {
                continue;
            }
            let best = found.iter().filter(|(b, _)| *b == body).map(|&(_, c)| c).max();
            prop_assert!(
                best.is_some_and(|c| c + 2 >= count),
                "loop {body:?} × {count} found as {best:?} in {greedy:?}"
            );
        }
    }
}

#[test]
fn loops_differing_in_an_inner_count_stay_apart() {
    // (a, 3 × b) twice, then (a, 5 × b): the third outer iteration differs only in its
    // inner count, so it stays outside the outer loop.
    let inner = |count| Node::Loop {
        count,
        body: vec![Node::Token(1)],
    };
    let tokens = expand(&[
        Node::Token(0),
        inner(3),
        Node::Token(0),
        inner(3),
        Node::Token(0),
        inner(5),
    ]);
    let expected = vec![
        Node::Loop {
            count: 2,
            body: vec![Node::Token(0), inner(3)],
        },
        Node::Token(0),
        inner(5),
    ];
    assert_eq!(discover(&tokens, Algorithm::Exact), expected);
    assert_eq!(discover(&tokens, Algorithm::Greedy), expected);
}
