//! Walking a database's keyspace without stalling the server, however many callers walk at once.
//!
//! Each caller is blocked (only it waits). One thread of ours, the walker, serves every walk in
//! progress in turn: it holds the server lock for one slice of about `ratelimit.walk-slice-us` on
//! one walk, lets the main thread in, then takes the next walk (round robin). So other clients
//! wait at most one slice whether one walk is in progress or hundreds, and a small walk queued
//! behind a huge one still finishes after a few rounds. The walker starts with the first walk and
//! ends when no walk is left; at most `ratelimit.max-walks` walks are in progress, further calls
//! are refused at once.
//!
//! A walk ends by unblocking its caller with the whole task as private data: the reply and every
//! free happen on the main thread. A caller that disconnects frees its walk at once if it waits
//! for its turn, or after the current slice if the walker holds it.

use std::collections::VecDeque;
use std::os::raw::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use redis_module::raw::{
    RedisModuleBlockedClient, RedisModuleCtx, RedisModuleKey, RedisModuleScanCursor, RedisModuleString,
    REDISMODULE_CTX_FLAGS_DENY_BLOCKING, REDISMODULE_KEYTYPE_STRING, REDISMODULE_KEYTYPE_ZSET, REDISMODULE_NO_EXPIRE,
    REDISMODULE_OK,
};

use crate::core::audit_filter::Probe;
use crate::redis::api::api;
use crate::redis::call::Call;
use crate::redis::ctx::{bytes_of, Ctx};
use crate::redis::{config, stats};

/// Scan steps (one hash bucket each) between two looks at the clock.
const STEPS_PER_CHECK: usize = 32;
/// The gap between slices, so that the main thread, waiting for the lock, gets it.
const PAUSE: Duration = Duration::from_micros(100);

/// What a walk does with the keys; every method but `reply` runs on the walker thread with the
/// server lock held.
pub trait Walk: Send {
    /// Before a slice's scan steps; an error ends the walk and is the reply.
    fn begin_slice(&mut self, ctx: &Ctx) -> Result<(), String>;
    /// One key, from inside the scan: read-only, the keyspace must not change here.
    fn visit(&mut self, key: &ScannedKey);
    /// After each batch of scan steps: reads and writes that must not run inside a scan step.
    fn settle(&mut self, ctx: &Ctx);
    fn end_slice(&mut self);
    /// The reply, on the main thread, once the walk is over (never if the client left).
    fn reply(&self, ctx: &Ctx);
}

/// A key as the scan hands it over: asked without reopening it (reopening could expire it and
/// emit a DEL in the middle of a read-only walk).
pub struct ScannedKey {
    pub(in crate::redis) name: *mut RedisModuleString,
    key: *mut RedisModuleKey,
}

impl ScannedKey {
    pub fn name(&self) -> &[u8] {
        // SAFETY: the scan's key name, live through the visit.
        unsafe { bytes_of(self.name) }
    }
}

impl Probe for &ScannedKey {
    fn is_string(&mut self) -> bool {
        // SAFETY: the scan's open key, live through the visit.
        unsafe { api!(RedisModule_KeyType)(self.key) as isize == REDISMODULE_KEYTYPE_STRING }
    }
    fn is_zset(&mut self) -> bool {
        // SAFETY: as above.
        unsafe { api!(RedisModule_KeyType)(self.key) as isize == REDISMODULE_KEYTYPE_ZSET }
    }
    fn has_ttl(&mut self) -> bool {
        // SAFETY: as above.
        unsafe { api!(RedisModule_GetAbsExpire)(self.key) != REDISMODULE_NO_EXPIRE as i64 }
    }
    fn len(&mut self) -> usize {
        // SAFETY: as above.
        unsafe { api!(RedisModule_ValueLength)(self.key) }
    }
}

/// One walk in progress: its caller, a context on the caller's database (Redis gives it the
/// client it keeps ready for each blocked client), its cursor.
struct Task {
    bc: *mut RedisModuleBlockedClient,
    ctx: *mut RedisModuleCtx,
    cursor: *mut RedisModuleScanCursor,
    db: c_int,
    walk: Box<dyn Walk>,
    error: Option<String>,
    /// Whether the walker has given it a slice yet (INFO's running, else queued).
    started: bool,
}

// SAFETY: the raw pointers are used by one thread at a time: the walker with the server lock
// held, or the main thread once the task has left the queue.
unsafe impl Send for Task {}

impl Drop for Task {
    fn drop(&mut self) {
        // SAFETY: both made for this task in `start`, freed once, on the main thread.
        unsafe {
            api!(RedisModule_ScanCursorDestroy)(self.cursor);
            api!(RedisModule_FreeThreadSafeContext)(self.ctx);
        }
    }
}

const INTERNAL_ERROR: &str = "ERR ratelimit: internal error during the walk, see the server log";

impl Task {
    /// One slice with the server lock held; false once the walk is over.
    fn slice(&mut self, cancel: &AtomicBool) -> bool {
        let _locked = Locked::new(self.ctx);
        // Read under the lock: the disconnect callback, which sets it, runs on the main thread.
        if cancel.load(Ordering::Relaxed) {
            return false;
        }
        self.started = true;
        match catch_unwind(AssertUnwindSafe(|| self.scan_for_a_slice())) {
            Ok(more) => more && self.error.is_none(),
            Err(_) => {
                self.error = Some(INTERNAL_ERROR.into());
                false
            }
        }
    }

    fn scan_for_a_slice(&mut self) -> bool {
        // SAFETY: the task's thread-safe context, live until the task is dropped; the lock is held.
        let ctx = unsafe { Ctx::from_raw(self.ctx) };
        ctx.select_db(self.db);
        if let Err(e) = self.walk.begin_slice(&ctx) {
            self.error = Some(e);
            return false;
        }
        // How long one slice may hold the server lock: other clients wait at most about this long.
        let slice = Duration::from_micros(config::WALK_SLICE_US.get().unsigned_abs());
        let started = Instant::now();
        let mut more = true;
        while more && self.error.is_none() {
            for _ in 0..STEPS_PER_CHECK {
                let privdata = (self as *mut Task).cast::<c_void>();
                // SAFETY: the context and cursor are the task's; `visit` gets the task back as its
                // private data, used only during this call.
                more = unsafe { api!(RedisModule_Scan)(self.ctx, self.cursor, Some(visit), privdata) } != 0;
                if !more {
                    break;
                }
            }
            self.walk.settle(&ctx);
            if started.elapsed() >= slice {
                break;
            }
        }
        self.walk.end_slice();
        more
    }

    /// Hands the task to the main thread, which replies (unless the caller left) and frees it.
    fn finish(self: Box<Task>) {
        let bc = self.bc;
        // SAFETY: the task's blocked client, unblocked once; the task becomes its private data,
        // freed by `free_task`.
        unsafe { api!(RedisModule_UnblockClient)(bc, Box::into_raw(self).cast()) };
    }
}

/// The walks in progress and the walker serving them.
struct Queue {
    /// Waiting for their next slice, in turn order.
    waiting: VecDeque<Box<Task>>,
    /// The blocked client of the task the walker holds, if any.
    in_hand: Option<usize>,
    walker_running: bool,
    /// The last walker thread, joined before the next one starts and at unload.
    walker: Option<JoinHandle<()>>,
}

impl Queue {
    fn in_progress(&self) -> usize {
        self.waiting.len() + usize::from(self.in_hand.is_some())
    }
}

static QUEUE: Mutex<Queue> =
    Mutex::new(Queue { waiting: VecDeque::new(), in_hand: None, walker_running: false, walker: None });

/// Set by the disconnect callback when the walker holds the leaving caller's task.
static CANCEL_IN_HAND: AtomicBool = AtomicBool::new(false);

/// The queue, locked. Lock order: the walker never waits for the server lock while holding this,
/// because the main thread takes this while holding the server lock.
fn queue() -> MutexGuard<'static, Queue> {
    QUEUE.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Blocks the caller and queues a walk of its selected database with `walk`. An error is the
/// reply to give instead; then nothing was started.
pub fn start(call: &Call, command: &str, walk: Box<dyn Walk>) -> Result<(), String> {
    let ctx = call.raw();
    // SAFETY: the command's live context.
    let flags = unsafe { api!(RedisModule_GetContextFlags)(ctx) } as u32;
    if flags & REDISMODULE_CTX_FLAGS_DENY_BLOCKING != 0 {
        return Err(format!(
            "ERR {command} cannot run inside MULTI/EXEC or a script: it blocks the caller while it walks the keyspace"
        ));
    }
    let mut queue = queue();
    let most = usize::try_from(config::MAX_WALKS.get()).unwrap_or(0);
    if queue.in_progress() >= most {
        stats::WALKS_REFUSED.add(1);
        return Err(format!(
            "ERR {command} refused: {most} AUDIT/REPAIR walks are already in progress (ratelimit.max-walks), try again later"
        ));
    }
    if !queue.walker_running {
        // The previous walker has left the queue for good: joining it takes no time.
        if let Some(previous) = queue.walker.take() {
            let _ = previous.join();
        }
        // Started before the caller is blocked, so that failing to start needs no unblocking.
        let spawned = thread::Builder::new().name("ratelimit-walk".into()).spawn(walker);
        queue.walker = Some(spawned.map_err(|_| "ERR ratelimit: could not start the walk thread".to_string())?);
        queue.walker_running = true;
    }
    // SAFETY: the command's live context; the blocked client and its thread-safe context live
    // until the task is freed on the main thread (`free_task` or `disconnected`).
    let task = unsafe {
        let bc = api!(RedisModule_BlockClient)(ctx, Some(reply), None, Some(free_task), 0);
        api!(RedisModule_SetDisconnectCallback)(bc, Some(disconnected));
        Task {
            bc,
            ctx: api!(RedisModule_GetThreadSafeContext)(bc),
            cursor: api!(RedisModule_ScanCursorCreate)(),
            db: call.selected_db(),
            walk,
            error: None,
            started: false,
        }
    };
    queue.waiting.push_back(Box::new(task));
    Ok(())
}

/// The walker thread: one slice of the first waiting walk, which then goes to the back of the
/// line, until no walk is left.
fn walker() {
    loop {
        let mut task = {
            let mut queue = queue();
            let Some(task) = queue.waiting.pop_front() else {
                queue.walker_running = false;
                return;
            };
            queue.in_hand = Some(task.bc as usize);
            CANCEL_IN_HAND.store(false, Ordering::Relaxed);
            task
        };
        let more = task.slice(&CANCEL_IN_HAND);
        let finished = {
            let mut queue = queue();
            queue.in_hand = None;
            if more && !CANCEL_IN_HAND.load(Ordering::Relaxed) {
                queue.waiting.push_back(task);
                None
            } else {
                Some(task)
            }
        };
        if let Some(task) = finished {
            task.finish();
        }
        thread::sleep(PAUSE);
    }
}

/// Walks (running: given a slice already, queued: not yet) in progress, for INFO.
pub fn in_progress() -> (usize, usize) {
    let queue = queue();
    let running = queue.waiting.iter().filter(|t| t.started).count() + usize::from(queue.in_hand.is_some());
    (running, queue.in_progress() - running)
}

/// At module unload: refuses while walks are in progress, else waits for the walker to be gone
/// (no thread may run the module's code once it is unmapped).
pub fn stop() -> Result<(), String> {
    let walker = {
        let mut queue = queue();
        if queue.in_progress() > 0 {
            return Err(format!("{} AUDIT/REPAIR walks are in progress", queue.in_progress()));
        }
        queue.walker.take()
    };
    // Joined without the queue: a walker that has just finished its last walk takes it once more
    // to see that nothing is left.
    if let Some(walker) = walker {
        let _ = walker.join();
    }
    Ok(())
}

/// Holds the server lock; released on drop, also when a panic unwinds through a slice.
struct Locked(*mut RedisModuleCtx);

impl Locked {
    fn new(ctx: *mut RedisModuleCtx) -> Locked {
        // SAFETY: a task's thread-safe context, live until the task is dropped.
        unsafe { api!(RedisModule_ThreadSafeContextLock)(ctx) };
        Locked(ctx)
    }
}

impl Drop for Locked {
    fn drop(&mut self) {
        // SAFETY: locked by `new` on this thread.
        unsafe { api!(RedisModule_ThreadSafeContextUnlock)(self.0) };
    }
}

unsafe extern "C" fn visit(
    _ctx: *mut RedisModuleCtx,
    name: *mut RedisModuleString,
    key: *mut RedisModuleKey,
    privdata: *mut c_void,
) {
    // SAFETY: the task given as private data by `scan_for_a_slice`, which waits for the scan step.
    let task = unsafe { &mut *privdata.cast::<Task>() };
    if task.error.is_some() {
        return;
    }
    let scanned = ScannedKey { name, key };
    if catch_unwind(AssertUnwindSafe(|| task.walk.visit(&scanned))).is_err() {
        task.error = Some(INTERNAL_ERROR.into());
    }
}

/// On the main thread, with the server lock: a waiting task is freed now, the one in the
/// walker's hand after its slice.
unsafe extern "C" fn disconnected(_ctx: *mut RedisModuleCtx, bc: *mut RedisModuleBlockedClient) {
    let mut queue = queue();
    if let Some(task) = queue.waiting.iter().position(|t| t.bc == bc).and_then(|at| queue.waiting.remove(at)) {
        drop(queue);
        task.finish();
    } else if queue.in_hand == Some(bc as usize) {
        CANCEL_IN_HAND.store(true, Ordering::Relaxed);
    }
}

unsafe extern "C" fn reply(ctx: *mut RedisModuleCtx, _argv: *mut *mut RedisModuleString, _argc: c_int) -> c_int {
    // SAFETY: the reply callback's live context; its private data is the finished task, alive
    // until `free_task` runs after this.
    let (ctx, task) =
        unsafe { (Ctx::from_raw(ctx), api!(RedisModule_GetBlockedClientPrivateData)(ctx).cast::<Task>().as_ref()) };
    let replied = catch_unwind(AssertUnwindSafe(|| match task {
        None => ctx.reply_error("ERR ratelimit: the walk ended without a result"),
        Some(Task { error: Some(error), .. }) => ctx.reply_error(error),
        Some(task) => task.walk.reply(&ctx),
    }));
    if replied.is_err() {
        ctx.reply_error("ERR ratelimit: internal error, see the server log");
    }
    REDISMODULE_OK as c_int
}

unsafe extern "C" fn free_task(_ctx: *mut RedisModuleCtx, privdata: *mut c_void) {
    if !privdata.is_null() {
        // SAFETY: the task `finish` handed over with `Box::into_raw`, freed once.
        drop(unsafe { Box::from_raw(privdata.cast::<Task>()) });
    }
}
