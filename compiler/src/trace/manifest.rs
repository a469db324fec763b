//! The trace directory's manifest (`manifest.json`): takes what `perfskel record` learnt
//! (command, MPI, times) and each rank file's header and ending, gives the serde JSON
//! document that lists the ranks and says which are missing or incomplete.

use serde::{Deserialize, Serialize};

use super::reader::{Completion, Header};

/// Everything about one recorded run that is not an event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Version of the rank files' format.
    pub format_version: u16,
    pub n_ranks: u32,
    /// `openmpi` or `mpich`.
    pub mpi: String,
    /// First line of `MPI_Get_library_version` (from rank 0, or the first rank found).
    pub mpi_library: String,
    /// First line of the launcher's `--version`.
    pub launcher_version: String,
    /// Hosts the ranks ran on, sorted.
    pub hosts: Vec<String>,
    /// The launcher command line as given to `perfskel record`.
    pub command: Vec<String>,
    pub start_unix_ns: u64,
    pub end_unix_ns: u64,
    /// The launcher's exit code (`None` when killed by a signal).
    pub exit_code: Option<i32>,
    pub ranks: Vec<RankEntry>,
    /// With `perfskel record --runs N`: every run's application time and which run the
    /// trace is (the median one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs: Option<Runs>,
}

/// The runs of `perfskel record --runs N`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Runs {
    /// Each run's application time ([`Manifest::app_ns`]), in run order.
    pub app_ns: Vec<u64>,
    /// The run kept as the trace, counted from 1.
    pub kept: usize,
}

/// One rank's file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankEntry {
    pub rank: u32,
    pub file: String,
    pub status: RankStatus,
    pub host: String,
    pub pid: u32,
    pub file_bytes: u64,
    pub events: u64,
    /// Time from the start of `MPI_Init` to the end of `MPI_Finalize` (or of the last
    /// event read, for an incomplete rank).
    pub total_ns: u64,
    /// Time from the end of `MPI_Init` to the start of `MPI_Finalize` (or the end of the
    /// last event): what a skeleton's `app_time` measures. 0 in manifests of older
    /// versions.
    #[serde(default)]
    pub app_ns: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RankStatus {
    Complete,
    /// No end record: the rank died; events up to the last whole record are kept.
    Incomplete,
    Missing,
    /// The file could not be read; the message says where.
    Unreadable(String),
}

/// What reading one rank file gave, for [`Manifest`] building.
#[derive(Clone, Debug)]
pub enum RankSummary {
    Read {
        header: Header,
        completion: Completion,
        events: u64,
        last_end_ns: u64,
        /// End of `MPI_Init` to start of `MPI_Finalize` (see [`RankEntry::app_ns`]).
        app_ns: u64,
        file_bytes: u64,
    },
    Missing,
    Unreadable(String),
}

/// What `perfskel record` knows about the run itself.
#[derive(Clone, Debug, Default)]
pub struct RunInfo {
    pub mpi: String,
    pub launcher_version: String,
    pub command: Vec<String>,
    pub start_unix_ns: u64,
    pub end_unix_ns: u64,
    pub exit_code: Option<i32>,
}

impl Manifest {
    /// Builds the manifest from the run and the summaries of ranks `0..summaries.len()`.
    pub fn build(run: RunInfo, summaries: &[RankSummary]) -> Manifest {
        let mut hosts: Vec<String> = Vec::new();
        let mut mpi_library = String::new();
        let mut ranks = Vec::new();
        for (rank, summary) in summaries.iter().enumerate() {
            let rank = u32::try_from(rank).unwrap_or(u32::MAX);
            let file = super::format::rank_file_name(rank);
            let entry = match summary {
                RankSummary::Read {
                    header,
                    completion,
                    events,
                    last_end_ns,
                    app_ns,
                    file_bytes,
                } => {
                    if mpi_library.is_empty() {
                        // MPICH separates fields with tabs: one space reads better.
                        let words: Vec<&str> = header.mpi_library.split_whitespace().collect();
                        mpi_library = words.join(" ");
                    }
                    if !hosts.contains(&header.host) {
                        hosts.push(header.host.clone());
                    }
                    let (status, total_ns) = match completion {
                        Completion::Complete { end_ns, .. } => (RankStatus::Complete, *end_ns),
                        Completion::Incomplete { .. } => (RankStatus::Incomplete, *last_end_ns),
                    };
                    RankEntry {
                        rank,
                        file,
                        status,
                        host: header.host.clone(),
                        pid: header.pid,
                        file_bytes: *file_bytes,
                        events: *events,
                        total_ns,
                        app_ns: *app_ns,
                    }
                }
                RankSummary::Missing => RankEntry::empty(rank, file, RankStatus::Missing),
                RankSummary::Unreadable(msg) => {
                    RankEntry::empty(rank, file, RankStatus::Unreadable(msg.clone()))
                }
            };
            ranks.push(entry);
        }
        hosts.sort();
        Manifest {
            format_version: super::format::VERSION,
            n_ranks: u32::try_from(summaries.len()).unwrap_or(u32::MAX),
            mpi: run.mpi,
            mpi_library,
            launcher_version: run.launcher_version,
            hosts,
            command: run.command,
            start_unix_ns: run.start_unix_ns,
            end_unix_ns: run.end_unix_ns,
            exit_code: run.exit_code,
            ranks,
            runs: None,
        }
    }

    /// The application's time in this run: the slowest rank's [`RankEntry::app_ns`].
    pub fn app_ns(&self) -> u64 {
        self.ranks.iter().map(|r| r.app_ns).max().unwrap_or(0)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    pub fn from_json(text: &str) -> Result<Manifest, String> {
        serde_json::from_str(text).map_err(|e| format!("manifest.json: {e}"))
    }
}

impl RankEntry {
    fn empty(rank: u32, file: String, status: RankStatus) -> RankEntry {
        RankEntry {
            rank,
            file,
            status,
            host: String::new(),
            pid: 0,
            file_bytes: 0,
            events: 0,
            total_ns: 0,
            app_ns: 0,
        }
    }
}
