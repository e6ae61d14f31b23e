//! Where a run's time goes, per phase (`compactlens run --timings`, and `timings.phases` in
//! `run.json`).
//!
//! - The run's own steps (loading, starting, the replays, finishing, writing the views) are
//!   timed on the thread that runs them with a [`Stopwatch`]: wall time, and the process's CPU
//!   time over the step (every thread's, so the replays' CPU is that of all the workers).
//! - Inside a replay, each worker keeps a [`Step`] clock: the time its thread spends in each
//!   step of a pair (metering the context, the strategy's compactions, the summaries, the
//!   request and provider checks, judging the checkpoints), switched at the step's edges, a few
//!   tens of nanoseconds each. A pair's CPU time is read from its worker's own CPU clock at the
//!   pair's start and end, and split between its steps in proportion to their time on the
//!   thread (on a machine with a core per worker the two are the same).
//!
//! CPU clocks are read from `/proc` (Linux); elsewhere they are `None` and only the wall and
//! thread times are recorded.

use std::cell::RefCell;
use std::time::{Duration, Instant};

use runlog::log::PhaseTiming;

/// A step of one replay, timed on its worker's thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Everything else a call does: metering the appended messages, the prefix cache, the
    /// strategy's trigger and estimate, the records.
    Context,
    /// The strategy's compactions (plan, apply, the compaction checks), its summaries apart.
    Compaction,
    /// The summarizer's calls.
    Summaries,
    /// The request's structural check and both providers' checks.
    ProviderChecks,
    /// Scoring the probes of each checkpoint (for a judge that defers, the wait for its
    /// scores at the end of the pair).
    Judging,
}

impl Step {
    /// Every step, in the order they are reported.
    pub const ALL: [Step; 5] = [Step::Context, Step::Compaction, Step::Summaries, Step::ProviderChecks, Step::Judging];

    /// The step's phase name in `run.json`.
    pub fn phase(self) -> &'static str {
        match self {
            Step::Context => "replay/context",
            Step::Compaction => "replay/compaction",
            Step::Summaries => "replay/summaries",
            Step::ProviderChecks => "replay/provider_checks",
            Step::Judging => "replay/judging",
        }
    }
}

struct Clock {
    current: Step,
    since: Instant,
    spent: [Duration; Step::ALL.len()],
}

impl Clock {
    fn new() -> Clock {
        Clock { current: Step::Context, since: Instant::now(), spent: [Duration::ZERO; Step::ALL.len()] }
    }
    /// Charge the time since the last switch to the current step and make `to` current.
    fn switch(&mut self, to: Step) -> Step {
        let now = Instant::now();
        self.spent[self.current as usize] += now.saturating_duration_since(self.since);
        self.since = now;
        std::mem::replace(&mut self.current, to)
    }
}

thread_local! {
    static CLOCK: RefCell<Clock> = RefCell::new(Clock::new());
}

/// Run `f`, its time on this thread charged to `step`; the step in progress goes on after.
pub fn within<T>(step: Step, f: impl FnOnce() -> T) -> T {
    let previous = CLOCK.with(|c| c.borrow_mut().switch(step));
    let out = f();
    CLOCK.with(|c| c.borrow_mut().switch(previous));
    out
}

/// The time of one pair on its worker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PairTime {
    /// Per [`Step::ALL`], the time on the thread.
    pub steps: [Duration; Step::ALL.len()],
    /// The worker's CPU time over the pair, when the system tells it.
    pub cpu: Option<Duration>,
}

/// The start of a pair on this thread: its step clock starts again.
#[derive(Debug)]
pub struct PairStart {
    cpu: Option<Duration>,
}

impl PairStart {
    /// Start timing a pair on this thread.
    pub fn now() -> PairStart {
        CLOCK.with(|c| *c.borrow_mut() = Clock::new());
        PairStart { cpu: thread_cpu() }
    }

    /// The pair's time since [`PairStart::now`], on the same thread.
    pub fn finish(self) -> PairTime {
        let steps = CLOCK.with(|c| {
            let mut c = c.borrow_mut();
            c.switch(Step::Context);
            c.spent
        });
        let cpu = match (self.cpu, thread_cpu()) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a)),
            _ => None,
        };
        PairTime { steps, cpu }
    }
}

/// The pairs' times added up.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplayTotals {
    pub steps: [Duration; Step::ALL.len()],
    /// CPU time of the pairs; `None` once a pair's was unknown.
    pub cpu: Option<Duration>,
    pairs: usize,
}

impl ReplayTotals {
    pub fn add(&mut self, t: &PairTime) {
        for (total, d) in self.steps.iter_mut().zip(t.steps) {
            *total += d;
        }
        self.cpu = match (self.pairs, self.cpu, t.cpu) {
            (0, _, cpu) => cpu,
            (_, Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
        self.pairs += 1;
    }

    /// One phase per step: its thread time, and its share of the pairs' CPU time.
    pub fn phases(&self) -> Vec<PhaseTiming> {
        let thread: Duration = self.steps.iter().sum();
        Step::ALL
            .into_iter()
            .zip(self.steps)
            .map(|(step, d)| PhaseTiming {
                phase: step.phase().to_string(),
                wall_ms: None,
                cpu_ms: self.cpu.map(|cpu| {
                    if thread.is_zero() {
                        0
                    } else {
                        (cpu.as_secs_f64() * d.as_secs_f64() / thread.as_secs_f64() * 1e3).round() as u64
                    }
                }),
                thread_ms: Some(millis(d)),
            })
            .collect()
    }
}

/// Wall and process CPU time of one of the run's own steps.
#[derive(Debug, Clone, Copy)]
pub struct Stopwatch {
    wall: Instant,
    cpu: Option<Duration>,
}

impl Stopwatch {
    pub fn start() -> Stopwatch {
        Stopwatch { wall: Instant::now(), cpu: process_cpu() }
    }

    /// The step named `phase`, from the start to now.
    pub fn phase(&self, phase: &str) -> PhaseTiming {
        let cpu = match (self.cpu, process_cpu()) {
            (Some(a), Some(b)) => Some(millis(b.saturating_sub(a))),
            _ => None,
        };
        PhaseTiming {
            phase: phase.to_string(),
            wall_ms: Some(millis(self.wall.elapsed())),
            cpu_ms: cpu,
            thread_ms: None,
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// This thread's CPU time (`/proc/thread-self/schedstat`: nanoseconds on the CPU).
pub fn thread_cpu() -> Option<Duration> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(ns))
}

/// The process's CPU time, user and system, every thread's (`/proc/self/stat`, in the
/// kernel's clock ticks of 1/100 s).
pub fn process_cpu() -> Option<Duration> {
    let text = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name, in parentheses, may hold spaces: the fields start after its `)`.
    let fields: Vec<&str> = text.get(text.rfind(')')? + 1..)?.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_charged_the_time_spent_in_them_nested_ones_apart() {
        let wall = Instant::now();
        let start = PairStart::now();
        within(Step::Compaction, || {
            std::thread::sleep(Duration::from_millis(20));
            within(Step::Summaries, || std::thread::sleep(Duration::from_millis(30)));
        });
        within(Step::Judging, || std::thread::sleep(Duration::from_millis(10)));
        let t = start.finish();
        let wall = wall.elapsed();
        let ms = |s: Step| t.steps[s as usize].as_millis();
        assert!(ms(Step::Compaction) >= 20, "{t:?}");
        assert!(ms(Step::Summaries) >= 30, "{t:?}");
        assert!(ms(Step::Judging) >= 10, "{t:?}");
        assert_eq!(ms(Step::ProviderChecks), 0);
        // The summaries' time is not charged to the compaction around them as well.
        assert!(t.steps.iter().sum::<Duration>() <= wall, "{t:?} in {wall:?}");
    }

    #[test]
    fn totals_split_the_pairs_cpu_by_thread_time() {
        let mut totals = ReplayTotals::default();
        let mut steps = [Duration::ZERO; 5];
        steps[Step::Context as usize] = Duration::from_millis(300);
        steps[Step::Judging as usize] = Duration::from_millis(100);
        totals.add(&PairTime { steps, cpu: Some(Duration::from_millis(200)) });
        totals.add(&PairTime { steps, cpu: Some(Duration::from_millis(200)) });
        let phases = totals.phases();
        let get = |name: &str| phases.iter().find(|p| p.phase == name).unwrap().clone();
        assert_eq!(get("replay/context").thread_ms, Some(600));
        assert_eq!(get("replay/context").cpu_ms, Some(300));
        assert_eq!(get("replay/judging").cpu_ms, Some(100));
        assert_eq!(get("replay/summaries").cpu_ms, Some(0));
        // One pair without a CPU figure makes the total unknown.
        totals.add(&PairTime { steps, cpu: None });
        assert_eq!(totals.phases()[0].cpu_ms, None);
    }

    #[test]
    fn the_process_and_thread_clocks_move_with_work() {
        let (Some(p0), Some(t0)) = (process_cpu(), thread_cpu()) else { return };
        // Work until this thread has had 50 ms of CPU (however loaded the machine is).
        let mut x = 0u64;
        let give_up = Instant::now() + Duration::from_secs(60);
        while thread_cpu().unwrap() - t0 < Duration::from_millis(50) && Instant::now() < give_up {
            for _ in 0..10_000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
        }
        assert!(thread_cpu().unwrap() - t0 >= Duration::from_millis(50));
        // The process's clock counts in ticks of 10 ms.
        assert!(process_cpu().unwrap() - p0 >= Duration::from_millis(30));
    }
}
