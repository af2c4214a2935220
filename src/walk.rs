//! Walking one database's keyspace without stalling the server.
//!
//! The calling client is blocked (only it waits); a thread of ours scans in slices, each holding
//! the server lock for about `ratelimit.walk-slice-us` over many `RedisModule_Scan` steps, then lets the main
//! thread in. When the walk ends the client is unblocked and answered from the main thread; if it
//! disconnects first, the walk stops at the next step and everything is freed.

use std::os::raw::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use redis_module::raw::{
    RedisModuleBlockedClient, RedisModuleCtx, RedisModuleKey, RedisModuleScanCursor, RedisModuleString,
    REDISMODULE_CTX_FLAGS_DENY_BLOCKING,
};

use crate::command::{api, reply_error, OK};
use crate::config;

/// Scan steps (one hash bucket each) between two looks at the clock.
const STEPS_PER_CHECK: usize = 32;
/// The gap between slices, so that the main thread, waiting for the lock, gets it.
const PAUSE: Duration = Duration::from_micros(100);

/// What a walk does with the keys; every method but `reply` runs on the walk thread with the
/// server lock held.
pub trait Walk: Send {
    /// Before a slice's scan steps; an error ends the walk and is the reply.
    fn begin_slice(&mut self, ctx: *mut RedisModuleCtx) -> Result<(), String>;
    /// One key, from inside `RedisModule_Scan`: read-only, the keyspace must not change here.
    fn visit(&mut self, ctx: *mut RedisModuleCtx, name: *mut RedisModuleString, key: *mut RedisModuleKey);
    /// After each batch of scan steps: reads and writes that must not run inside a scan step.
    fn settle(&mut self, ctx: *mut RedisModuleCtx);
    fn end_slice(&mut self, ctx: *mut RedisModuleCtx);
    /// The reply, on the main thread, once the walk is over (never if the client left).
    fn reply(&self, ctx: *mut RedisModuleCtx) -> c_int;
}

struct Job {
    walk: Box<dyn Walk>,
    error: Option<String>,
}

/// Cancel flags of running walks, by blocked-client address: the disconnect callback only gets
/// the blocked client.
static RUNNING: Mutex<Vec<(usize, Arc<AtomicBool>)>> = Mutex::new(Vec::new());

fn running() -> std::sync::MutexGuard<'static, Vec<(usize, Arc<AtomicBool>)>> {
    RUNNING.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Blocks the caller and walks its selected database with `walk` on a thread.
///
/// # Safety
/// `ctx` must be the context of the command being executed.
pub unsafe fn start(ctx: *mut RedisModuleCtx, command: &str, walk: Box<dyn Walk>) -> c_int {
    let flags = unsafe { api!(RedisModule_GetContextFlags)(ctx) } as u32;
    if flags & REDISMODULE_CTX_FLAGS_DENY_BLOCKING != 0 {
        return reply_error(
            ctx,
            &format!("ERR {command} cannot run inside MULTI/EXEC or a script: it blocks the caller while it walks the keyspace"),
        );
    }
    let db = unsafe { api!(RedisModule_GetSelectedDb)(ctx) };
    // The thread first, so that failing to start it needs no unblocking.
    let (handoff, receive) = mpsc::sync_channel::<(usize, Arc<AtomicBool>)>(1);
    let job = Job { walk, error: None };
    let spawned = thread::Builder::new().name("ratelimit-walk".into()).spawn(move || {
        if let Ok((bc, cancel)) = receive.recv() {
            unsafe { run(bc as *mut RedisModuleBlockedClient, db, job, &cancel) };
        }
    });
    if spawned.is_err() {
        return reply_error(ctx, "ERR ratelimit: could not start the walk thread");
    }
    let bc = unsafe { api!(RedisModule_BlockClient)(ctx, Some(reply), None, Some(free_job), 0) };
    let cancel = Arc::new(AtomicBool::new(false));
    running().push((bc as usize, Arc::clone(&cancel)));
    unsafe { api!(RedisModule_SetDisconnectCallback)(bc, Some(disconnected)) };
    // The receiver lives until the thread has it, so this cannot fail.
    let _ = handoff.send((bc as usize, cancel));
    OK
}

/// Holds the server lock; released on drop, also when a panic unwinds through a slice.
struct Locked(*mut RedisModuleCtx);

impl Locked {
    unsafe fn new(ctx: *mut RedisModuleCtx) -> Locked {
        unsafe { api!(RedisModule_ThreadSafeContextLock)(ctx) };
        Locked(ctx)
    }
}

impl Drop for Locked {
    fn drop(&mut self) {
        unsafe { api!(RedisModule_ThreadSafeContextUnlock)(self.0) };
    }
}

unsafe fn run(bc: *mut RedisModuleBlockedClient, db: c_int, mut job: Job, cancel: &AtomicBool) {
    let ctx = unsafe { api!(RedisModule_GetThreadSafeContext)(bc) };
    let cursor = unsafe { api!(RedisModule_ScanCursorCreate)() };
    let walked = catch_unwind(AssertUnwindSafe(|| unsafe { scan_all(ctx, db, cursor, &mut job, cancel) }));
    if walked.is_err() {
        job.error = Some("ERR ratelimit: internal error during the walk, see the server log".into());
    }
    unsafe {
        api!(RedisModule_ScanCursorDestroy)(cursor);
        api!(RedisModule_FreeThreadSafeContext)(ctx);
    }
    running().retain(|(addr, _)| *addr != bc as usize);
    unsafe { api!(RedisModule_UnblockClient)(bc, Box::into_raw(Box::new(job)).cast()) };
}

unsafe fn scan_all(
    ctx: *mut RedisModuleCtx,
    db: c_int,
    cursor: *mut RedisModuleScanCursor,
    job: &mut Job,
    cancel: &AtomicBool,
) {
    let mut more = true;
    while more && job.error.is_none() && !cancel.load(Ordering::Relaxed) {
        {
            let _locked = unsafe { Locked::new(ctx) };
            // A thread-safe context starts on database 0: walk the caller's.
            unsafe { api!(RedisModule_SelectDb)(ctx, db) };
            if let Err(e) = job.walk.begin_slice(ctx) {
                job.error = Some(e);
                break;
            }
            // How long one slice may hold the server lock: other clients wait at most about this long.
            let slice = Duration::from_micros(config::WALK_SLICE_US.get().unsigned_abs());
            let started = Instant::now();
            while more && job.error.is_none() && !cancel.load(Ordering::Relaxed) {
                for _ in 0..STEPS_PER_CHECK {
                    let privdata = (job as *mut Job).cast::<c_void>();
                    more = unsafe { api!(RedisModule_Scan)(ctx, cursor, Some(visit), privdata) } != 0;
                    if !more {
                        break;
                    }
                }
                job.walk.settle(ctx);
                if started.elapsed() >= slice {
                    break;
                }
            }
            job.walk.end_slice(ctx);
        }
        if more {
            thread::sleep(PAUSE);
        }
    }
}

unsafe extern "C" fn visit(
    ctx: *mut RedisModuleCtx,
    name: *mut RedisModuleString,
    key: *mut RedisModuleKey,
    privdata: *mut c_void,
) {
    let job = unsafe { &mut *privdata.cast::<Job>() };
    if job.error.is_some() {
        return;
    }
    if catch_unwind(AssertUnwindSafe(|| job.walk.visit(ctx, name, key))).is_err() {
        job.error = Some("ERR ratelimit: internal error during the walk, see the server log".into());
    }
}

unsafe extern "C" fn disconnected(_ctx: *mut RedisModuleCtx, bc: *mut RedisModuleBlockedClient) {
    for (addr, cancel) in running().iter() {
        if *addr == bc as usize {
            cancel.store(true, Ordering::Relaxed);
        }
    }
}

unsafe extern "C" fn reply(ctx: *mut RedisModuleCtx, _argv: *mut *mut RedisModuleString, _argc: c_int) -> c_int {
    let job = unsafe { api!(RedisModule_GetBlockedClientPrivateData)(ctx) }.cast::<Job>();
    if job.is_null() {
        return reply_error(ctx, "ERR ratelimit: the walk ended without a result");
    }
    let job = unsafe { &*job };
    let replied = catch_unwind(AssertUnwindSafe(|| match &job.error {
        Some(error) => reply_error(ctx, error),
        None => job.walk.reply(ctx),
    }));
    replied.unwrap_or_else(|_| reply_error(ctx, "ERR ratelimit: internal error, see the server log"))
}

unsafe extern "C" fn free_job(_ctx: *mut RedisModuleCtx, privdata: *mut c_void) {
    if !privdata.is_null() {
        drop(unsafe { Box::from_raw(privdata.cast::<Job>()) });
    }
}
