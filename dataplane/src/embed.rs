//! A dataplane queue inside an application's own process.
//!
//! [`EmbeddedQueue::start`] builds one configured queue (XDP program, AF_XDP
//! socket, node, pipeline) on a thread of its own, pinned to the queue's
//! core and, if asked, inside a network namespace, and returns a handle.
//! The application submits verbs and collects their completions through the
//! handle's lock-free queues; no system call and no lock sits between it
//! and the polling core. Each submitted verb completes exactly once: with
//! its result, or with an error saying it had no effect.

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

pub use crate::incarnation::Incarnation;
use crate::pipeline::{CommandKind, Completion, FinalReport, QueueShared, Submission};
use crate::queue::build_memory;
use crate::queue::{AuthenticatedLinks, BuiltQueue, build_queue};
use crate::workload::Aim;
use oae_client::control::{Answer, ControlError, WorkloadReport, WorkloadSpec};
use oae_config::Config;
use oae_pmd::xdp::Steering;
use oae_proto::auth::LinkIdentity;
use oae_proto::verb::Refusal;
use oae_proto::{SharedMemory, Store};

/// How long a stopping queue keeps running to finish or reverse what is in
/// flight.
const DRAIN: Duration = Duration::from_secs(1);

/// One running queue, owned by the application.
pub struct EmbeddedQueue {
    shared: Arc<QueueShared>,
    /// Where this queue's READs and bilateral swaps land.
    memory: SharedMemory,
    thread: Option<JoinHandle<Option<FinalReport>>>,
}

impl EmbeddedQueue {
    /// Builds queue `index` of `config` with incarnation `epoch` on a new
    /// thread, inside network namespace `netns` if given, and starts its
    /// polling loop. Returns once the queue runs, or with the reason it
    /// could not be built: among others, an authenticated link with the
    /// MACs and channel of one another embedded queue of this process runs
    /// (the two would share nonces).
    pub fn start(
        config: &Config,
        index: usize,
        epoch: u32,
        netns: Option<&str>,
    ) -> Result<EmbeddedQueue, String> {
        EmbeddedQueue::start_on(&build_memory(config)?, config, index, epoch, netns)
    }

    /// As [`EmbeddedQueue::start`], over `memory`: queues started on one
    /// memory (from [`build_memory`]) share it, as an `oaed`'s queues do.
    pub fn start_on(
        memory: &SharedMemory,
        config: &Config,
        index: usize,
        epoch: u32,
        netns: Option<&str>,
    ) -> Result<EmbeddedQueue, String> {
        let memory = memory.for_core(index as u16);
        let local = memory.clone();
        let q = config
            .queues
            .get(index)
            .ok_or_else(|| format!("the configuration has no queue {index}"))?;
        let (config, netns, core) = (config.clone(), netns.map(str::to_string), q.core);
        let (ready_tx, ready_rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name(format!("oae-q{index}"))
            .spawn(move || {
                if let Some(ns) = &netns
                    && let Err(e) = oae_pmd::netns::enter(ns)
                {
                    let _ = ready_tx.send(Err(e.to_string()));
                    return None;
                }
                if let Some(core) = core
                    && let Err(e) = oae_os::pin::pin_current_thread(core)
                {
                    let _ = ready_tx.send(Err(format!("queue {index}: {e}")));
                    return None;
                }
                let mut steering = Default::default();
                match build_claiming_links(&config, index, epoch, &memory, &mut steering) {
                    Ok((built, claimed)) => {
                        let _ = ready_tx.send(Ok(Arc::clone(&built.shared)));
                        let report = built.run(DRAIN);
                        // Detaches the XDP program, after the socket is gone.
                        drop(steering);
                        drop(claimed);
                        Some(report)
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        None
                    }
                }
            })
            .map_err(|e| format!("cannot start the polling thread: {e}"))?;
        match ready_rx.recv() {
            Ok(Ok(shared)) => Ok(EmbeddedQueue {
                shared,
                memory: local,
                thread: Some(thread),
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => {
                let _ = thread.join();
                Err("the polling thread exited while starting".into())
            }
        }
    }

    /// Queues a verb for the polling core. When the submission queue is
    /// full the verb is handed back untouched: nothing was submitted.
    // The verb comes back by value so the caller can retry it without
    // keeping a copy; boxing it would allocate once per submission.
    #[allow(clippy::result_large_err)]
    pub fn submit(&self, submission: Submission) -> Result<(), Submission> {
        self.shared.submit(submission)
    }

    /// The next completion, if one is ready.
    pub fn poll_completion(&self) -> Option<Completion> {
        self.shared.completions.pop()
    }

    /// Copies `out.len()` bytes at `offset` of the registered region
    /// `region` into `out`: where a completed READ or bilateral swap
    /// landed. A refusal if the block is not inside the region.
    pub fn read_local(&self, region: u16, offset: u32, out: &mut [u8]) -> Result<(), Refusal> {
        let (index, facts) = self.memory.find(region).ok_or(Refusal::UnknownRegion)?;
        let range = facts.check(offset, out.len())?;
        self.memory.load(index, range.start, out);
        Ok(())
    }

    /// Asks the polling core a control question (status, counters, a
    /// workload) and waits up to `timeout` for the answer.
    pub fn ask(&self, what: CommandKind, timeout: Duration) -> Result<Answer, ControlError> {
        self.shared.ask(what, timeout)
    }

    /// Starts a workload on the queue's link `spec.link`.
    pub fn workload_start(
        &self,
        spec: WorkloadSpec,
        timeout: Duration,
    ) -> Result<(), ControlError> {
        self.ask(CommandKind::WorkloadStart(spec), timeout)
            .map(drop)
    }

    /// The workload that runs, or ran, towards `aim`.
    pub fn workload_status(
        &self,
        aim: Aim,
        timeout: Duration,
    ) -> Result<WorkloadReport, ControlError> {
        match self.ask(CommandKind::WorkloadStatus(aim), timeout)? {
            Answer::Workload(report) => Ok(*report),
            other => Err(ControlError::failed(format!(
                "asked for a workload's report, the queue answered {other:?}"
            ))),
        }
    }

    /// True once every link of the queue is up.
    pub fn link_up(&self) -> bool {
        matches!(
            self.ask(CommandKind::Status, Duration::from_secs(5)),
            Ok(Answer::QueueStatus(s)) if s.all_up()
        )
    }

    /// Stops the queue: no new work, in-flight verbs finish or reverse,
    /// queued submissions complete as not submitted; then the socket closes
    /// and the XDP program detaches. Returns the final counters.
    pub fn stop(mut self) -> Option<FinalReport> {
        self.halt()
    }

    fn halt(&mut self) -> Option<FinalReport> {
        self.shared.request_stop();
        self.thread.take()?.join().ok().flatten()
    }
}

/// The authenticated links of the embedded queues running in this
/// process: a queue whose link shares another's identity would share its
/// nonces, so it is refused as `oaed` refuses it among its queues.
static RUNNING_LINKS: LazyLock<Mutex<AuthenticatedLinks>> = LazyLock::new(Default::default);

fn running_links() -> MutexGuard<'static, AuthenticatedLinks> {
    // The set is whole between statements: a panic elsewhere spoils nothing.
    RUNNING_LINKS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A running queue's claim on its links' identities, given up when the
/// queue's thread ends, however it ends.
struct ClaimedLinks(Vec<LinkIdentity>);

impl Drop for ClaimedLinks {
    fn drop(&mut self) {
        running_links().release(&self.0);
    }
}

/// Builds queue `index`, its authenticated links checked against those of
/// the embedded queues already running (held while it builds, so two
/// queues starting at once are checked against each other too).
fn build_claiming_links(
    config: &Config,
    index: usize,
    epoch: u32,
    memory: &SharedMemory,
    steering: &mut BTreeMap<String, Steering>,
) -> Result<(BuiltQueue, ClaimedLinks), String> {
    let mut running = running_links();
    let mut with_ours = running.clone();
    if config.node_id.is_none() && config.queues.iter().any(|q| q.fabric) {
        // Its queues would find a lower node id at its address with no
        // process to start again at another (oaed's way, N4).
        return Err("an embedded dataplane with a fabric needs node_id: give one".into());
    }
    let me = Incarnation::at(config, &config.state_dir(), epoch)?;
    let built = build_queue(config, index, &me, memory, steering, &mut with_ours)?;
    let ours = with_ours.claimed_since(&running);
    *running = with_ours;
    // Made once the lock is let go: its drop takes the lock.
    drop(running);
    Ok((built, ClaimedLinks(ours)))
}

impl Drop for EmbeddedQueue {
    fn drop(&mut self) {
        self.halt();
    }
}
