//! The communication matrix as an SVG heat map: bytes per (sender, receiver) on a log
//! colour scale with its colour bar, rank ids on the axes (in the order drawn, which
//! may be a topology's), and each cell's values as a tooltip (`<title>`). Written by
//! hand: the picture is a grid of rectangles, and plotters has no colour bar. Used by
//! `perfskel topo --plot` and by `perfskel report`, which draws the application's and
//! the skeleton's matrices on one scale.

use std::collections::BTreeMap;
use std::fmt::Write;

use perfskel_compiler::logicalize::CommMatrix;

/// At most this many cells per side: bigger matrices are drawn in blocks of ranks.
pub const MAX_CELLS: u32 = 256;

/// How the ranks are laid along both axes.
pub struct AxisOrder {
    /// What a position on the axis is: `rank`, `rank in grid(4, 4) order`.
    pub label: String,
    /// Position of each rank on the axis (a permutation of `0..n`).
    pub position: Vec<u32>,
}

impl AxisOrder {
    /// Ranks in their own order.
    pub fn identity(n: u32) -> AxisOrder {
        AxisOrder {
            label: "rank".into(),
            position: (0..n).collect(),
        }
    }
}

/// One matrix ready to draw: its cells summed per block of positions.
pub struct Cells {
    /// Ranks in the matrix.
    pub n: u32,
    /// Ranks per cell side (1 up to [`MAX_CELLS`] ranks).
    pub block: u32,
    /// Cells per side.
    pub side: u32,
    /// (sender cell, receiver cell) → (messages, bytes).
    pub sums: BTreeMap<(u32, u32), (u64, u64)>,
    /// The rank at each position, for the axis labels.
    pub rank_at: Vec<u32>,
    pub label: String,
}

impl Cells {
    pub fn new(matrix: &CommMatrix, order: &AxisOrder) -> Cells {
        let n = matrix.n_ranks.max(1);
        let block = n.div_ceil(MAX_CELLS).max(1);
        let side = n.div_ceil(block);
        let at = |r: u32| order.position.get(r as usize).copied().unwrap_or(r);
        let mut sums: BTreeMap<(u32, u32), (u64, u64)> = BTreeMap::new();
        for (&(src, dst), traffic) in &matrix.p2p {
            let cell = sums
                .entry((at(src) / block, at(dst) / block))
                .or_insert((0, 0));
            cell.0 = cell.0.saturating_add(traffic.messages);
            cell.1 = cell.1.saturating_add(traffic.bytes);
        }
        let mut rank_at: Vec<u32> = (0..n).collect();
        for rank in 0..n {
            if let Some(slot) = rank_at.get_mut(at(rank) as usize) {
                *slot = rank;
            }
        }
        Cells {
            n,
            block,
            side,
            sums,
            rank_at,
            label: order.label.clone(),
        }
    }

    /// The heaviest cell's bytes (at least 1).
    pub fn max_bytes(&self) -> u64 {
        self.sums
            .values()
            .map(|&(_, b)| b)
            .max()
            .unwrap_or(1)
            .max(1)
    }

    /// What the cell at a position along one axis holds: `3` or `ranks 16–31`.
    fn axis_name(&self, cell: u32) -> String {
        if self.block == 1 {
            format!("rank {}", self.rank_at.get(cell as usize).unwrap_or(&cell))
        } else {
            let first = cell * self.block;
            let last = (first + self.block).min(self.n) - 1;
            format!("positions {first}–{last}")
        }
    }

    /// The tick label of a cell: the rank there, or the first position of the block.
    fn tick(&self, cell: u32) -> String {
        if self.block == 1 {
            self.rank_at.get(cell as usize).unwrap_or(&cell).to_string()
        } else {
            (cell * self.block).to_string()
        }
    }
}

/// Bytes as people read them: `512 B`, `4.0 KiB`, `62.5 MiB`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// The colour of a level in 0..=1: a perceptually ordered ramp (viridis' ends and
/// three points between), pale for little, dark for much.
pub fn ramp(level: f64) -> String {
    // From pale yellow (little) to dark purple (much), so that the heaviest cells stand
    // out on white.
    const STOPS: [(f64, [f64; 3]); 5] = [
        (0.00, [253.0, 231.0, 37.0]),
        (0.25, [94.0, 201.0, 98.0]),
        (0.50, [33.0, 145.0, 140.0]),
        (0.75, [59.0, 82.0, 139.0]),
        (1.00, [68.0, 1.0, 84.0]),
    ];
    let level = if level.is_finite() {
        level.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let mut rgb = STOPS[STOPS.len() - 1].1;
    for pair in STOPS.windows(2) {
        let ((a, ca), (b, cb)) = (pair[0], pair[1]);
        if level <= b {
            let t = (level - a) / (b - a);
            rgb = [0, 1, 2].map(|i| ca[i] + t * (cb[i] - ca[i]));
            break;
        }
    }
    format!(
        "#{:02x}{:02x}{:02x}",
        rgb[0].round() as u8,
        rgb[1].round() as u8,
        rgb[2].round() as u8
    )
}

/// The level of a cell's bytes on a log scale from 1 B (0) to `max` (1).
fn level(bytes: u64, max: u64) -> f64 {
    if max <= 1 {
        return 1.0;
    }
    ((bytes.max(1) as f64).ln() / (max as f64).ln()).clamp(0.0, 1.0)
}

/// A tick step of 1, 2 or 5 times a power of ten, at least `raw` (positive).
pub fn nice_step(raw: f64) -> f64 {
    if !(raw.is_finite() && raw > 0.0) {
        return 1.0;
    }
    let power = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|&s| s >= raw * (1.0 - 1e-9))
        .unwrap_or(10.0 * power)
}

/// Escapes text for SVG and HTML.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Side of the square of cells, in pixels.
const GRID_PX: f64 = 480.0;
const LEFT: f64 = 78.0;
const TOP: f64 = 46.0;
const BAR_GAP: f64 = 28.0;
const BAR_W: f64 = 16.0;
/// Room for the colour bar's labels and the bottom axis.
const RIGHT: f64 = 96.0;
const BOTTOM: f64 = 58.0;
/// At most this many labelled ticks per axis.
const MAX_TICKS: u32 = 16;

/// Draws `cells` with the colour scale running to `scale_max` bytes (the largest of the
/// matrices drawn side by side, so that they share it).
pub fn svg(cells: &Cells, title: &str, scale_max: u64) -> String {
    let side = cells.side.max(1);
    let px = GRID_PX / f64::from(side);
    let width = LEFT + GRID_PX + BAR_GAP + BAR_W + RIGHT;
    let height = TOP + GRID_PX + BOTTOM;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="sans-serif" font-size="12" shape-rendering="crispEdges">"#
    );
    let _ = writeln!(
        s,
        r#"<rect width="{width:.0}" height="{height:.0}" fill="white"/>"#
    );
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="22" text-anchor="middle" font-size="15">{}</text>"#,
        LEFT + GRID_PX / 2.0,
        escape(title)
    );
    // The empty matrix: a light frame, so that a cell with traffic stands out.
    let _ = writeln!(
        s,
        r##"<rect x="{LEFT}" y="{TOP}" width="{GRID_PX}" height="{GRID_PX}" fill="#f4f4f4" stroke="#999"/>"##
    );
    for (&(src, dst), &(messages, bytes)) in &cells.sums {
        let _ = writeln!(
            s,
            r#"<rect x="{:.2}" y="{:.2}" width="{px:.2}" height="{px:.2}" fill="{}"><title>{} → {}: {} ({} B), {} message(s)</title></rect>"#,
            LEFT + f64::from(dst) * px,
            TOP + f64::from(src) * px,
            ramp(level(bytes, scale_max)),
            escape(&cells.axis_name(src)),
            escape(&cells.axis_name(dst)),
            human_bytes(bytes),
            bytes,
            messages
        );
    }
    // Ticks at cell centres, labelled with the rank drawn there.
    let every = side.div_ceil(MAX_TICKS).max(1);
    for cell in (0..side).step_by(every as usize) {
        let centre = f64::from(cell) * px + px / 2.0;
        let label = escape(&cells.tick(cell));
        let (x, y) = (LEFT + centre, TOP + GRID_PX);
        let _ = writeln!(
            s,
            r##"<line x1="{x:.2}" y1="{y:.2}" x2="{x:.2}" y2="{:.2}" stroke="#333"/><text x="{x:.2}" y="{:.2}" text-anchor="middle">{label}</text>"##,
            y + 5.0,
            y + 18.0
        );
        let (x, y) = (LEFT, TOP + centre);
        let _ = writeln!(
            s,
            r##"<line x1="{:.2}" y1="{y:.2}" x2="{x:.2}" y2="{y:.2}" stroke="#333"/><text x="{:.2}" y="{:.2}" text-anchor="end">{label}</text>"##,
            x - 5.0,
            x - 8.0,
            y + 4.0
        );
    }
    let unit = if cells.block > 1 {
        format!(" (blocks of {} ranks)", cells.block)
    } else {
        String::new()
    };
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">receiver, {}{}</text>"#,
        LEFT + GRID_PX / 2.0,
        TOP + GRID_PX + 40.0,
        escape(&cells.label),
        unit
    );
    let _ = writeln!(
        s,
        r#"<text transform="translate(20 {:.1}) rotate(-90)" text-anchor="middle">sender, {}{}</text>"#,
        TOP + GRID_PX / 2.0,
        escape(&cells.label),
        unit
    );
    colour_bar(&mut s, scale_max);
    s.push_str("</svg>\n");
    s
}

/// The colour bar right of the grid: the ramp from 1 B (bottom) to `max` (top), ticks
/// at powers of 1024 and at the maximum.
fn colour_bar(s: &mut String, max: u64) {
    let x = LEFT + GRID_PX + BAR_GAP;
    const STEPS: u32 = 64;
    let step = GRID_PX / f64::from(STEPS);
    for i in 0..STEPS {
        let level = (f64::from(i) + 0.5) / f64::from(STEPS);
        let _ = writeln!(
            s,
            r#"<rect x="{x:.1}" y="{:.2}" width="{BAR_W}" height="{:.2}" fill="{}"/>"#,
            TOP + GRID_PX - f64::from(i + 1) * step,
            step + 0.3,
            ramp(level)
        );
    }
    let _ = writeln!(
        s,
        r##"<rect x="{x:.1}" y="{TOP}" width="{BAR_W}" height="{GRID_PX}" fill="none" stroke="#999"/>"##
    );
    let y_of = |bytes: u64| TOP + GRID_PX * (1.0 - level(bytes, max));
    let mut ticks = vec![1u64];
    let mut power = 1024u64;
    while power < max {
        ticks.push(power);
        power = power.saturating_mul(1024);
    }
    // The maximum, unless a power of 1024 sits too close below it to read both.
    if ticks
        .last()
        .is_some_and(|&last| y_of(last) - y_of(max) < 14.0)
    {
        ticks.pop();
    }
    ticks.push(max);
    for bytes in ticks {
        let y = y_of(bytes);
        let _ = writeln!(
            s,
            r##"<line x1="{:.1}" y1="{y:.2}" x2="{:.1}" y2="{y:.2}" stroke="#333"/><text x="{:.1}" y="{:.2}">{}</text>"##,
            x + BAR_W,
            x + BAR_W + 4.0,
            x + BAR_W + 7.0,
            y + 4.0,
            human_bytes(bytes)
        );
    }
    let _ = writeln!(
        s,
        r#"<text transform="translate({:.1} {:.1}) rotate(-90)" text-anchor="middle">bytes sent, log scale</text>"#,
        x - 8.0,
        TOP + GRID_PX / 2.0
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfskel_compiler::logicalize::Traffic;

    fn ring(n: u32) -> CommMatrix {
        let mut m = CommMatrix::new(n).expect("ranks");
        for r in 0..n {
            let traffic = Traffic {
                messages: 10,
                bytes: 1000 * u64::from(r + 1),
                time_s: None,
            };
            m.add_p2p(r, (r + 1) % n, traffic).expect("pair");
        }
        m
    }

    #[test]
    fn ticks_name_the_rank_drawn_at_each_position() {
        // Ranks reversed: position 0 is rank 3.
        let order = AxisOrder {
            label: "rank in ring order".into(),
            position: vec![3, 2, 1, 0],
        };
        let cells = Cells::new(&ring(4), &order);
        assert_eq!(cells.rank_at, vec![3, 2, 1, 0]);
        // Rank 0 sends to rank 1: sender position 3, receiver position 2.
        assert_eq!(cells.sums.get(&(3, 2)), Some(&(10, 1000)));
        let svg = svg(&cells, "t", cells.max_bytes());
        assert!(svg.contains("<title>rank 0 → rank 1: 1000 B (1000 B), 10 message(s)</title>"));
        // Four ticks per axis, at cell centres, none at the far edge (no phantom rank).
        assert_eq!(svg.matches("text-anchor=\"middle\">3</text>").count(), 1);
        assert!(!svg.contains(">4</text>"));
        assert!(
            svg.contains("x1=\"138.00\""),
            "first tick at the centre of cell 0"
        );
    }

    #[test]
    fn large_matrices_are_drawn_in_blocks_with_a_colour_bar() {
        let cells = Cells::new(&ring(1000), &AxisOrder::identity(1000));
        assert_eq!((cells.block, cells.side), (4, 250));
        let svg = svg(&cells, "t", cells.max_bytes());
        assert!(svg.contains("(blocks of 4 ranks)"));
        assert!(svg.contains("positions 0–3 → positions 0–3"));
        assert!(svg.contains(">1 B</text>"));
        assert!(
            svg.contains(">1.0 MiB</text>"),
            "a tick at each power of 1024"
        );
        assert!(svg.contains("bytes sent, log scale"));
    }

    #[test]
    fn the_ramp_runs_from_pale_to_dark() {
        assert_eq!(ramp(0.0), "#fde725");
        assert_eq!(ramp(1.0), "#440154");
        assert_eq!(ramp(f64::NAN), "#fde725");
        assert_eq!(ramp(0.5), "#21918c");
    }

    #[test]
    fn bytes_read_as_people_write_them() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(4096), "4.0 KiB");
        assert_eq!(human_bytes(65_536_000), "62.5 MiB");
    }
}
