//! The example skeletons bundled into the binary, so `perfskel demo` works anywhere.

/// (file name, text) of each example in `examples/skeletons/`, in a fixed order.
pub const SKELETONS: &[(&str, &str)] = &[
    (
        "stencil2d.skel",
        include_str!("../examples/skeletons/stencil2d.skel"),
    ),
    (
        "ring_pipeline.skel",
        include_str!("../examples/skeletons/ring_pipeline.skel"),
    ),
    ("cg.skel", include_str!("../examples/skeletons/cg.skel")),
    (
        "master_worker.skel",
        include_str!("../examples/skeletons/master_worker.skel"),
    ),
    (
        "transpose.skel",
        include_str!("../examples/skeletons/transpose.skel"),
    ),
    (
        "tree_reduce.skel",
        include_str!("../examples/skeletons/tree_reduce.skel"),
    ),
    (
        "rowcol.skel",
        include_str!("../examples/skeletons/rowcol.skel"),
    ),
];
