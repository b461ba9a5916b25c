//! What the server process costs, read from `/proc` (Linux): CPU time and resident memory.

use std::sync::OnceLock;

use anyhow::{Context, Result};

/// Clock ticks per second of `/proc/<pid>/stat` times (`getconf CLK_TCK`, 100 when unknown).
fn clk_tck() -> f64 {
    static TCK: OnceLock<f64> = OnceLock::new();
    *TCK.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// User + system CPU seconds used so far by process `pid`, all threads.
pub fn cpu_secs(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    // Fields after the `(comm)`, which may contain blanks: state is field 3, utime 14, stime 15.
    let rest = &stat[stat.rfind(')').context("malformed stat")? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| -> Result<f64> {
        Ok(fields
            .get(i)
            .context("short stat")?
            .parse::<u64>()
            .context("stat field")? as f64)
    };
    Ok((ticks(14 - 3)? + ticks(15 - 3)?) / clk_tck())
}

/// Resident set size of process `pid` in MiB (`VmRSS`).
pub fn rss_mib(pid: u32) -> Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .context("no VmRSS")?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()?;
    Ok(kib / 1024.0)
}

/// Measures the CPU spent between `start` and [`CpuMeter::per_msg_us`] by the server (or the
/// servers of a cluster, added up) and by this process (the benchmark client), so a run shows
/// which of the two saturates.
pub struct CpuMeter {
    pids: Vec<u32>,
    start: f64,
    client_start: f64,
}

/// CPU per message of one measured phase, µs.
pub struct CpuPerMsg {
    /// The server process, all threads (for a cluster: every node's process, added up).
    pub server: f64,
    /// The benchmark client (this process, all threads: async-nats and the harness).
    pub client: f64,
}

/// User + system CPU seconds used so far by all of `pids`, added up.
fn cpu_secs_all(pids: &[u32]) -> Result<f64> {
    pids.iter().map(|&pid| cpu_secs(pid)).sum()
}

impl CpuMeter {
    /// Starts measuring process `pid` and this process.
    pub fn start(pid: u32) -> Result<Self> {
        Self::start_all(&[pid])
    }

    /// Starts measuring the processes `pids` together (a cluster's nodes) and this process.
    pub fn start_all(pids: &[u32]) -> Result<Self> {
        Ok(Self {
            pids: pids.to_vec(),
            start: cpu_secs_all(pids)?,
            client_start: cpu_secs(std::process::id())?,
        })
    }

    /// Server and client CPU µs per message for `msgs` messages handled since `start`.
    pub fn per_msg_us(&self, msgs: usize) -> Result<CpuPerMsg> {
        let per = |secs: f64| secs * 1e6 / msgs as f64;
        Ok(CpuPerMsg {
            server: per(cpu_secs_all(&self.pids)? - self.start),
            client: per(cpu_secs(std::process::id())? - self.client_start),
        })
    }
}
