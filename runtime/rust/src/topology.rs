//! Topologies and directions: a [`Topology`] and a rank → the peer a [`Dir`] names, or
//! no peer at all (a grid border, a leaf's child), which makes an operation do nothing
//! like `MPI_PROC_NULL`. Pure arithmetic without MPI, with the same meaning as
//! perfskel's checker (`compiler/src/semantics.rs`), so a generated program talks to
//! exactly the peers the checker simulated.

/// The logical arrangement of the ranks of the world communicator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Topology {
    /// Periodic 1-D: `NEXT` of the last rank is rank 0.
    Ring,
    /// Non-periodic 1-D: the last rank has no `NEXT`, rank 0 no `PREV`.
    Chain,
    /// A row-major cartesian grid (`MPI_Cart_create` order) with per-dimension
    /// periodicity.
    Grid { dims: Vec<u64>, periodic: Vec<bool> },
    /// 2ⁿ ranks; `bit(i)` is `rank ^ 2ⁱ`.
    Hypercube,
    /// A k-ary tree rooted at rank 0: parent `(r - 1) / k`, children `k·r + 1 ..= k·r + k`.
    Tree { arity: u64 },
    /// Rank 0 is the hub, every other rank a leaf.
    Star,
    /// Everybody talks to everybody, by explicit rank.
    Complete,
    /// Explicit neighbour lists, `(rank, neighbours)`; unlisted ranks have none.
    Graph { neighbors: Vec<(u64, Vec<u64>)> },
}

impl Topology {
    /// `grid(d0, d1, ...)`, not periodic.
    pub fn grid(dims: &[u64]) -> Topology {
        Topology::Grid {
            dims: dims.to_vec(),
            periodic: vec![false; dims.len()],
        }
    }

    /// `torus(d0, d1, ...)`: a grid periodic in every dimension.
    pub fn torus(dims: &[u64]) -> Topology {
        Topology::Grid {
            dims: dims.to_vec(),
            periodic: vec![true; dims.len()],
        }
    }

    /// `grid(d0, d1, ..., periodic = [...])`.
    pub fn grid_periodic(dims: &[u64], periodic: &[bool]) -> Topology {
        Topology::Grid {
            dims: dims.to_vec(),
            periodic: periodic.to_vec(),
        }
    }

    /// `graph(0: [1, 2], 1: [0], ...)`.
    pub fn graph(neighbors: &[(u64, &[u64])]) -> Topology {
        Topology::Graph {
            neighbors: neighbors.iter().map(|(r, l)| (*r, l.to_vec())).collect(),
        }
    }

    /// Why this topology cannot hold `n_ranks` ranks, if it cannot.
    pub fn mismatch(&self, n_ranks: u64) -> Option<String> {
        match self {
            Topology::Grid { dims, periodic } => {
                let product = dims.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d));
                if dims.len() != periodic.len() {
                    Some(format!(
                        "the grid has {} dimensions but {} periodicity flags",
                        dims.len(),
                        periodic.len()
                    ))
                } else if product != Some(n_ranks) {
                    Some(format!(
                        "the grid {dims:?} holds {} ranks, the job has {n_ranks}",
                        product.map_or("too many".to_string(), |p| p.to_string())
                    ))
                } else {
                    None
                }
            }
            Topology::Hypercube if !n_ranks.is_power_of_two() => Some(format!(
                "a hypercube needs a power of two ranks, the job has {n_ranks}"
            )),
            Topology::Tree { arity: 0 } => Some("a tree needs an arity of at least 1".into()),
            _ => None,
        }
    }
}

/// A topology-relative peer. Constants such as [`EAST`] and functions such as
/// [`child`] build them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dir {
    /// One step along grid dimension `dim` (0 is x), forward (`+`) or back.
    Axis {
        dim: u32,
        forward: bool,
    },
    /// A relative move in every grid dimension (diagonals).
    Offset(Vec<i64>),
    Next,
    Prev,
    Parent,
    Child(i64),
    Hub,
    Leaf(i64),
    Bit(i64),
    Neighbor(i64),
    /// `shift(DIM, DISP)`: DISP steps along grid dimension `dim`.
    Shift {
        dim: u32,
        disp: i64,
    },
}

pub const EAST: Dir = Dir::Axis {
    dim: 0,
    forward: true,
};
pub const WEST: Dir = Dir::Axis {
    dim: 0,
    forward: false,
};
pub const NORTH: Dir = Dir::Axis {
    dim: 1,
    forward: true,
};
pub const SOUTH: Dir = Dir::Axis {
    dim: 1,
    forward: false,
};
pub const UP: Dir = Dir::Axis {
    dim: 2,
    forward: true,
};
pub const DOWN: Dir = Dir::Axis {
    dim: 2,
    forward: false,
};
pub const PLUS_X: Dir = EAST;
pub const MINUS_X: Dir = WEST;
pub const PLUS_Y: Dir = NORTH;
pub const MINUS_Y: Dir = SOUTH;
pub const PLUS_Z: Dir = UP;
pub const MINUS_Z: Dir = DOWN;
pub const NEXT: Dir = Dir::Next;
pub const PREV: Dir = Dir::Prev;
pub const PARENT: Dir = Dir::Parent;
pub const HUB: Dir = Dir::Hub;

/// `+dN`: one step forward along dimension `dim`.
pub fn plus(dim: u32) -> Dir {
    Dir::Axis { dim, forward: true }
}

/// `-dN`: one step back along dimension `dim`.
pub fn minus(dim: u32) -> Dir {
    Dir::Axis {
        dim,
        forward: false,
    }
}

/// `+d(EXPR)`: one step forward along the dimension an expression gives (the checker
/// keeps it in range; a negative one is no dimension, so no neighbour).
pub fn plus_dim(dim: i64) -> Dir {
    Dir::Axis {
        dim: u32::try_from(dim).unwrap_or(u32::MAX),
        forward: true,
    }
}

/// `-d(EXPR)`: one step back along the dimension an expression gives.
pub fn minus_dim(dim: i64) -> Dir {
    Dir::Axis {
        dim: u32::try_from(dim).unwrap_or(u32::MAX),
        forward: false,
    }
}

/// `shift(DIM, DISP)`: DISP steps along the dimension DIM (the checker keeps it in
/// range; a negative one is no dimension, so no neighbour).
pub fn shift(dim: i64, disp: i64) -> Dir {
    Dir::Shift {
        dim: u32::try_from(dim).unwrap_or(u32::MAX),
        disp,
    }
}

/// `offset(dx, dy, ...)`.
pub fn offset(steps: &[i64]) -> Dir {
    Dir::Offset(steps.to_vec())
}

/// `child(i)` in a tree.
pub fn child(i: i64) -> Dir {
    Dir::Child(i)
}

/// `leaf(i)` of a star: rank i + 1.
pub fn leaf(i: i64) -> Dir {
    Dir::Leaf(i)
}

/// `bit(i)` of a hypercube.
pub fn bit(i: i64) -> Dir {
    Dir::Bit(i)
}

/// `neighbor(i)`: the i-th entry of this rank's list in a graph.
pub fn neighbor(i: i64) -> Dir {
    Dir::Neighbor(i)
}

/// The shape of one communicator, in that communicator's ranks: the world's topology,
/// a cartesian sub-grid, or none (a `split`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shape {
    Grid {
        dims: Vec<u64>,
        periodic: Vec<bool>,
    },
    Hypercube {
        bits: u32,
    },
    Tree {
        arity: u64,
    },
    Star,
    Complete,
    Graph {
        neighbors: Vec<Vec<u64>>,
    },
    /// Ranks can only be addressed explicitly.
    Unstructured,
}

impl Shape {
    /// The world's shape for `topology` over `n_ranks` ranks.
    pub fn of_topology(topology: &Topology, n_ranks: u64) -> Shape {
        match topology {
            Topology::Ring => Shape::Grid {
                dims: vec![n_ranks],
                periodic: vec![true],
            },
            Topology::Chain => Shape::Grid {
                dims: vec![n_ranks],
                periodic: vec![false],
            },
            Topology::Grid { dims, periodic } => Shape::Grid {
                dims: dims.clone(),
                periodic: periodic.clone(),
            },
            Topology::Hypercube => Shape::Hypercube {
                bits: n_ranks.max(1).ilog2(),
            },
            Topology::Tree { arity } => Shape::Tree { arity: *arity },
            Topology::Star => Shape::Star,
            Topology::Complete => Shape::Complete,
            Topology::Graph { neighbors } => {
                let mut lists = vec![Vec::new(); n_ranks as usize];
                for (rank, list) in neighbors {
                    if let Some(slot) = lists.get_mut(*rank as usize) {
                        slot.extend(list.iter().copied());
                    }
                }
                Shape::Graph { neighbors: lists }
            }
        }
    }

    /// The shape of `cart_sub(keep)` of a grid: the kept dimensions, in order.
    pub fn sub_grid(&self, keep: &[u32]) -> Result<Shape, String> {
        match self {
            Shape::Grid { dims, periodic } => {
                let mut sub_dims = Vec::new();
                let mut sub_periodic = Vec::new();
                for &k in keep {
                    let k = k as usize;
                    if k >= dims.len() {
                        return Err(format!(
                            "cart_sub keeps dimension {k}, the grid has {}",
                            dims.len()
                        ));
                    }
                    sub_dims.push(dims[k]);
                    sub_periodic.push(periodic[k]);
                }
                Ok(Shape::Grid {
                    dims: sub_dims,
                    periodic: sub_periodic,
                })
            }
            _ => Err("cart_sub needs a grid communicator".into()),
        }
    }

    /// The coordinates of `rank` (grids: row-major; hypercubes: its bits).
    pub fn coords(&self, rank: u64) -> Vec<u64> {
        match self {
            Shape::Grid { dims, .. } => {
                let mut coords = vec![0; dims.len()];
                let mut rest = rank;
                for (slot, &dim) in coords.iter_mut().zip(dims).rev() {
                    let dim = dim.max(1);
                    *slot = rest % dim;
                    rest /= dim;
                }
                coords
            }
            Shape::Hypercube { bits } => (0..*bits).map(|b| (rank >> b) & 1).collect(),
            _ => Vec::new(),
        }
    }

    /// The peer `dir` names from `rank` in a communicator of `size` ranks: `Ok(Some)`,
    /// `Ok(None)` for a missing neighbour, or why the direction is invalid here.
    pub fn peer(&self, rank: u64, size: u64, dir: &Dir) -> Result<Option<u64>, String> {
        let index = |i: i64| u64::try_from(i).map_err(|_| format!("index {i} is negative"));
        match (self, dir) {
            // One step is a shift by one.
            (Shape::Grid { .. }, Dir::Axis { dim, forward }) => self.peer(
                rank,
                size,
                &Dir::Shift {
                    dim: *dim,
                    disp: if *forward { 1 } else { -1 },
                },
            ),
            (Shape::Grid { dims, periodic }, Dir::Shift { dim, disp }) => {
                let dim = *dim as usize;
                if dim >= dims.len() {
                    return Err(format!(
                        "the grid has {} dimension(s); this direction moves along dimension {dim}",
                        dims.len()
                    ));
                }
                Ok(grid_shift(dims, periodic, rank, |i| {
                    if i == dim {
                        *disp
                    } else {
                        0
                    }
                }))
            }
            (Shape::Grid { dims, periodic }, Dir::Offset(steps)) => {
                if steps.len() != dims.len() {
                    return Err(format!(
                        "the offset has {} component(s), the grid {} dimension(s)",
                        steps.len(),
                        dims.len()
                    ));
                }
                Ok(grid_shift(dims, periodic, rank, |i| steps[i]))
            }
            (Shape::Grid { dims, periodic }, Dir::Next | Dir::Prev) if dims.len() == 1 => {
                let step = if *dir == Dir::Next { 1 } else { -1 };
                Ok(grid_shift(dims, periodic, rank, |_| step))
            }
            (Shape::Hypercube { bits }, Dir::Bit(i)) => {
                let bit = index(*i)?;
                if bit >= u64::from(*bits) {
                    return Err(format!(
                        "bit {bit} is out of range: the hypercube has {bits} dimensions"
                    ));
                }
                Ok(Some(rank ^ (1 << bit)))
            }
            (Shape::Tree { arity }, Dir::Parent) => {
                Ok((rank > 0).then(|| (rank - 1) / arity.max(&1)))
            }
            (Shape::Tree { arity }, Dir::Child(i)) => {
                let i = index(*i)?;
                if i >= *arity {
                    return Err(format!("child({i}) is out of range for tree({arity})"));
                }
                Ok(rank
                    .checked_mul(*arity)
                    .and_then(|r| r.checked_add(i + 1))
                    .filter(|&c| c < size))
            }
            (Shape::Star, Dir::Hub) => Ok((rank != 0).then_some(0)),
            (Shape::Star, Dir::Leaf(i)) => {
                let i = index(*i)?;
                if i + 1 >= size {
                    return Err(format!(
                        "leaf({i}) is out of range: the star has {} leaves",
                        size - 1
                    ));
                }
                Ok(Some(i + 1))
            }
            (Shape::Graph { neighbors }, Dir::Neighbor(i)) => {
                let i = index(*i)?;
                let list = neighbors.get(rank as usize).map_or(&[][..], Vec::as_slice);
                Ok(list.get(i as usize).copied())
            }
            (shape, dir) => Err(format!("{dir:?} is not a direction of {shape:?}")),
        }
    }
}

/// The rank reached from `rank` by moving `offset(dim)` along every dimension, or
/// `None` off the edge of a non-periodic dimension.
fn grid_shift(
    dims: &[u64],
    periodic: &[bool],
    rank: u64,
    offset: impl Fn(usize) -> i64,
) -> Option<u64> {
    let mut rest = rank;
    let mut stride: u64 = 1;
    let mut result: u64 = 0;
    for i in (0..dims.len()).rev() {
        let dim = dims[i].max(1);
        let coord = rest % dim;
        rest /= dim;
        let step = offset(i);
        let new_coord = if step == 0 {
            coord
        } else {
            let dim_signed = i64::try_from(dim).ok()?;
            let moved = i64::try_from(coord).ok()?.checked_add(step)?;
            if periodic.get(i).copied().unwrap_or(false) {
                moved.rem_euclid(dim_signed) as u64
            } else if (0..dim_signed).contains(&moved) {
                moved as u64
            } else {
                return None;
            }
        };
        result = result.checked_add(new_coord.checked_mul(stride)?)?;
        stride = stride.checked_mul(dim)?;
    }
    Some(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grids_are_row_major_with_borders() {
        let grid = Shape::of_topology(&Topology::grid(&[4, 4]), 16);
        assert_eq!(grid.coords(6), vec![1, 2]);
        // Dimension 0 is x: east of rank 6 = (2, 2) = rank 10.
        assert_eq!(grid.peer(6, 16, &EAST), Ok(Some(10)));
        assert_eq!(grid.peer(6, 16, &NORTH), Ok(Some(7)));
        assert_eq!(grid.peer(12, 16, &EAST), Ok(None));
        assert_eq!(grid.peer(3, 16, &NORTH), Ok(None));
        assert_eq!(grid.peer(5, 16, &offset(&[1, -1])), Ok(Some(8)));
        let torus = Shape::of_topology(&Topology::torus(&[4, 4]), 16);
        assert_eq!(torus.peer(12, 16, &EAST), Ok(Some(0)));
        assert_eq!(torus.peer(0, 16, &SOUTH), Ok(Some(3)));
        assert!(grid.peer(0, 16, &UP).is_err());
        assert!(grid.peer(0, 16, &offset(&[1])).is_err());
    }

    #[test]
    fn rings_chains_and_sub_grids() {
        let ring = Shape::of_topology(&Topology::Ring, 4);
        assert_eq!(ring.peer(3, 4, &NEXT), Ok(Some(0)));
        assert_eq!(ring.peer(0, 4, &PREV), Ok(Some(3)));
        let chain = Shape::of_topology(&Topology::Chain, 4);
        assert_eq!(chain.peer(3, 4, &NEXT), Ok(None));
        assert_eq!(chain.peer(0, 4, &PREV), Ok(None));
        assert_eq!(chain.peer(1, 4, &PLUS_X), Ok(Some(2)));
        let torus = Shape::of_topology(&Topology::torus(&[4, 4]), 16);
        let row = torus.sub_grid(&[1]).expect("a grid");
        assert_eq!(
            row,
            Shape::Grid {
                dims: vec![4],
                periodic: vec![true]
            }
        );
        assert_eq!(row.peer(3, 4, &NEXT), Ok(Some(0)));
        assert!(torus.sub_grid(&[2]).is_err());
        assert!(Shape::Star.sub_grid(&[0]).is_err());
    }

    #[test]
    fn trees_stars_hypercubes_graphs() {
        let tree = Shape::of_topology(&Topology::Tree { arity: 2 }, 15);
        assert_eq!(tree.peer(0, 15, &PARENT), Ok(None));
        assert_eq!(tree.peer(6, 15, &PARENT), Ok(Some(2)));
        assert_eq!(tree.peer(6, 15, &child(1)), Ok(Some(14)));
        assert_eq!(tree.peer(7, 15, &child(0)), Ok(None));
        assert!(tree.peer(1, 15, &child(2)).is_err());
        assert_eq!(Shape::Star.peer(3, 4, &HUB), Ok(Some(0)));
        assert_eq!(Shape::Star.peer(0, 4, &HUB), Ok(None));
        assert_eq!(Shape::Star.peer(0, 4, &leaf(2)), Ok(Some(3)));
        assert!(Shape::Star.peer(0, 4, &leaf(3)).is_err());
        let cube = Shape::of_topology(&Topology::Hypercube, 8);
        assert_eq!(cube.peer(5, 8, &bit(1)), Ok(Some(7)));
        assert_eq!(cube.coords(5), vec![1, 0, 1]);
        assert!(cube.peer(5, 8, &bit(3)).is_err());
        let graph = Shape::of_topology(&Topology::graph(&[(0, &[1, 2]), (1, &[0])]), 3);
        assert_eq!(graph.peer(0, 3, &neighbor(1)), Ok(Some(2)));
        assert_eq!(graph.peer(1, 3, &neighbor(1)), Ok(None));
        assert_eq!(graph.peer(2, 3, &neighbor(0)), Ok(None));
        assert!(Shape::Complete.peer(0, 4, &NEXT).is_err());
    }

    #[test]
    fn sizes_that_do_not_fit_are_explained() {
        assert_eq!(Topology::grid(&[2, 2]).mismatch(4), None);
        assert!(Topology::grid(&[4, 4])
            .mismatch(4)
            .is_some_and(|m| m.contains("16 ranks")));
        assert!(Topology::Hypercube.mismatch(6).is_some());
        assert_eq!(Topology::Ring.mismatch(5), None);
    }
}
