//! Every call of the limiter against real servers, with the module and with the library.

mod common;

use std::time::Duration;

use common::{key, Kind, Server, KINDS};
use redis_ratelimit_client::{
    read_answer, Adaptive, AllOptions, Backend, Calendar, Error, Fixed, Limit, Limiter, Rate, RedisConnection,
    RedisPool, Report, Sliding, TopOptions, TopView, FOREVER,
};

const MINUTE: Duration = Duration::from_secs(60);

#[tokio::test]
async fn fixed_window_counts_and_denies_with_its_reset() {
    for kind in KINDS {
        let server = Server::start(kind);
        let rl = server.limiter().await;
        let k = key("fixed");
        let f = Fixed::new(2, MINUTE);
        let first = rl.hit(&k, &f).await.unwrap();
        assert!(first.allowed && first.count == 1 && first.remaining == 1 && first.limit == 2, "{kind:?} {first:?}");
        assert_eq!(first.window, Some(MINUTE));
        assert!(first.retry_after.is_none());
        rl.hit(&k, &f).await.unwrap();
        let denied = rl.hit(&k, &f).await.unwrap();
        assert!(!denied.allowed && denied.count == 2 && denied.remaining == 0);
        let retry = denied.retry_after.unwrap();
        assert!(retry > Duration::from_secs(58) && retry <= MINUTE, "{retry:?}");
        let peeked = rl.peek(&k, 2, 1).await.unwrap();
        assert!(!peeked.allowed && peeked.count == 2 && peeked.window.is_none());
        let back = rl.refund_hit(&k, &f, 1).await.unwrap();
        assert_eq!(back.count, 1);
        let above = rl.hit(&key("above"), &Fixed::new(2, MINUTE).with_cost(5)).await.unwrap();
        assert_eq!(above.retry_after, Some(FOREVER), "a cost above the limit is never admitted");
        let headers = denied.headers("api");
        assert_eq!(headers[0], ("RateLimit-Policy", "\"api\";q=2;w=60".to_string()));
        assert_eq!(headers[2].0, "Retry-After");
        assert_eq!(rl.backend().await.unwrap(), if kind == Kind::Module { Backend::Module } else { Backend::Library });
    }
}

#[tokio::test]
async fn an_adaptive_limit_learns_from_the_providers_answers() {
    for kind in KINDS {
        let server = Server::start(kind);
        let rl = server.limiter().await;
        let k = key("llm");
        let terms = Adaptive::new(6, 60, 600, MINUTE);
        let mut admitted = 0;
        for _ in 0..20 {
            admitted += i32::from(rl.adapt(&k, &terms).await.unwrap().allowed);
        }
        assert_eq!(admitted, 10, "{kind:?}: a sixth of 60 at once");
        // A 429's answer, read as every client reads it: one cut, and the whole fleet held.
        let answer = read_answer(Some(429), [("Retry-After", "20")], std::time::SystemTime::now());
        let report = Report::throttled().with_retry_after(answer.retry_after.unwrap());
        let learned = rl.report(&k, &report).await.unwrap().unwrap();
        assert!(
            learned.limit == 42 && learned.decreased && learned.hold > Duration::from_millis(19_900),
            "{learned:?}"
        );
        assert!(!rl.report(&k, &Report::throttled()).await.unwrap().unwrap().decreased, "one cut per epoch");
        let held = rl.adapt(&k, &terms).await.unwrap();
        assert!(!held.allowed && held.retry_after.unwrap() > Duration::from_millis(19_900), "{held:?}");
        assert_eq!(rl.report(&k, &Report::ok().with_limit(30)).await.unwrap().unwrap().limit, 30);
        assert_eq!(rl.report(&key("nobody"), &Report::throttled()).await.unwrap(), None);
        let up_to = rl.adapt_up_to(&key("partial"), &terms.with_cost(25)).await.unwrap();
        assert_eq!(up_to.granted, 10);
        // An estimate reserved, then settled with what was used: the rest back, once.
        let tokens = Adaptive::new(600, 6_000, 60_000, MINUTE).with_cost(1_000);
        let r = rl.reserve_adapt(&key("tokens"), &tokens).await.unwrap();
        assert!(r.decision.allowed && r.token().is_some() && r.amount == 1_000 && r.decision.remaining == 0);
        let s = rl.settle(&r, 300).await.unwrap();
        assert_eq!((s.applied, s.decision.limit, s.decision.window), (-700, 6_000, Some(MINUTE)));
        assert!(s.decision.remaining >= 700, "{s:?}");
        assert_eq!(rl.settle(&r, 300).await.unwrap().applied, -700);
    }
}

#[tokio::test]
async fn calendar_and_aligned_windows() {
    for kind in KINDS {
        let server = Server::start(kind);
        let rl = server.limiter().await;
        let day = rl.hit(&key("day"), &Fixed::new(10, Calendar::Day).in_zone("+05:30")).await.unwrap();
        assert!(day.allowed && day.window.is_none() && day.reset_after <= Duration::from_secs(86_400));
        let aligned = rl.hit(&key("aligned"), &Fixed::new(10, Duration::from_millis(1500)).aligned()).await.unwrap();
        assert!(aligned.allowed && aligned.reset_after <= Duration::from_millis(1500));
    }
}

#[tokio::test]
async fn sliding_window_and_gcra() {
    for kind in KINDS {
        let server = Server::start(kind);
        let rl = server.limiter().await;
        let k = key("slide");
        let s = Sliding::new(3, MINUTE);
        for _ in 0..3 {
            assert!(rl.slide(&k, &s).await.unwrap().allowed);
        }
        let denied = rl.slide(&k, &s).await.unwrap();
        assert!(!denied.allowed && denied.retry_after.is_some());
        assert!(!rl.slide_peek(&k, &s).await.unwrap().allowed);
        assert_eq!(rl.refund_slide(&k, &s, 1).await.unwrap().count, 2);
        let grant = rl.slide_up_to(&k, &s.with_cost(5)).await.unwrap();
        assert!(grant.decision.allowed && grant.granted == 1);

        let g = key("gcra");
        let rate = Rate::new(1, 1, Duration::from_secs(10));
        let taken = rl.gcra(&g, &rate).await.unwrap();
        assert!(
            taken.allowed && taken.limit == 2 && taken.remaining == 1 && taken.window == Some(Duration::from_secs(10))
        );
        rl.gcra(&g, &rate).await.unwrap();
        let empty = rl.gcra(&g, &rate).await.unwrap();
        assert!(!empty.allowed && empty.retry_after.unwrap() <= Duration::from_secs(10));
        assert!(rl.refund_gcra(&g, &rate, 1).await.unwrap().remaining >= 1);
        let up_to = rl.gcra_up_to(&key("g2"), &rate.with_tokens(5)).await.unwrap();
        assert_eq!(up_to.granted, 2);
    }
}

#[tokio::test]
async fn reservations_settle_once_with_what_was_used() {
    for kind in KINDS {
        let server = Server::start(kind);
        let rl = server.limiter().await;
        let k = key("reserve");
        let f = Fixed::new(100, MINUTE).with_cost(40);
        let reserved = rl.reserve_hit(&k, &f).await.unwrap();
        assert!(reserved.is_reserved() && reserved.amount == 40 && reserved.decision.count == 40);
        let settled = rl.settle(&reserved, 10).await.unwrap();
        assert_eq!((settled.applied, settled.decision.count, settled.decision.limit), (-30, 10, 100));
        assert_eq!(settled.decision.window, Some(MINUTE));
        let again = rl.settle(&reserved, 10).await.unwrap();
        assert_eq!(again.decision.count, 10, "a second settle changes nothing");

        let up_to = rl.reserve_hit_up_to(&k, &Fixed::new(100, MINUTE).with_cost(500)).await.unwrap();
        assert_eq!(up_to.amount, 90);
        let s = rl.reserve_slide(&key("rs"), &Sliding::new(10, MINUTE).with_cost(4)).await.unwrap();
        assert_eq!(rl.settle(&s, 1).await.unwrap().decision.count, 1);
        let s = rl.reserve_slide_up_to(&key("rs"), &Sliding::new(10, MINUTE).with_cost(40)).await.unwrap();
        assert_eq!(s.amount, 10);
        let g = rl.reserve_gcra(&key("rg"), &Rate::new(9, 10, MINUTE).with_tokens(5)).await.unwrap();
        let settled = rl.settle(&g, 2).await.unwrap();
        assert_eq!((settled.applied, settled.decision.limit, settled.decision.remaining), (-3, 10, 8));
        let g = rl.reserve_gcra_up_to(&key("rg"), &Rate::new(9, 10, MINUTE).with_tokens(50)).await.unwrap();
        assert_eq!(g.amount, 10);

        let denied = rl.reserve_hit(&k, &Fixed::new(1, MINUTE)).await.unwrap();
        assert!(!denied.is_reserved());
        assert!(matches!(rl.settle(&denied, 1).await, Err(Error::InvalidArgument(_))));
    }
}

#[tokio::test]
async fn several_limits_all_or_nothing() {
    for kind in KINDS {
        let server = Server::start(kind);
        let rl = server.limiter().await;
        let (a, b) = (key("{u}:a"), key("{u}:b"));
        let limits = [Limit::new(&a, 2, MINUTE), Limit::new(&b, 1, Duration::from_millis(1500))];
        let first = rl.hit_all(&limits, &AllOptions::new()).await.unwrap();
        assert!(first.allowed && first.decisions.len() == 2);
        let second = rl.hit_all(&limits, &AllOptions::new()).await.unwrap();
        assert!(!second.allowed && second.decisions[0].allowed && !second.decisions[1].allowed);
        assert_eq!(second.decisions[0].count, 1, "a denial counts on no limit");
        assert!(second.retry_after().unwrap() <= Duration::from_millis(1500));
        let sliding = rl.hit_all(&[Limit::new(key("{s}"), 2, MINUTE)], &AllOptions::new().sliding()).await.unwrap();
        assert!(sliding.allowed);

        let (r, t) = (key("{llm}:r"), key("{llm}:t"));
        let tokens = [Limit::new(&r, 10, MINUTE), Limit::new(&t, 1000, MINUTE)];
        let reserved = rl.reserve_all(&tokens, &AllOptions::new().with_tokens(300, 1)).await.unwrap();
        assert!(reserved.decision.allowed && reserved.keys() == [t.clone()]);
        let settled = rl.settle_all(&reserved, 120).await.unwrap();
        assert_eq!((settled[0].applied, settled[0].decision.count), (-180, 120));
    }
}

#[tokio::test]
async fn leases_acquire_renew_release() {
    for kind in KINDS {
        let server = Server::start(kind);
        let rl = server.limiter().await;
        let k = key("lease");
        let held = rl.acquire(&k, 1, Duration::from_secs(30), None).await.unwrap();
        assert!(held.acquired && held.in_use == 1 && held.wait == Duration::from_secs(30));
        let id = held.id.clone().unwrap();
        let busy = rl.acquire(&k, 1, Duration::from_secs(30), None).await.unwrap();
        assert!(!busy.acquired && busy.id.is_none() && busy.wait <= Duration::from_secs(30));
        let retried = rl.acquire(&k, 1, Duration::from_secs(30), Some(&id)).await.unwrap();
        assert!(retried.acquired, "a retry with the same id is counted once");
        assert_eq!(rl.renew(&k, &id, Duration::from_millis(1500)).await.unwrap(), Some(Duration::from_millis(1500)));
        assert!(rl.release(&k, &id).await.unwrap());
        assert!(!rl.release(&k, &id).await.unwrap());
        assert_eq!(rl.renew(&k, &id, MINUTE).await.unwrap(), None);
    }
}

#[tokio::test]
async fn top_needs_the_module() {
    let server = Server::start(Kind::Module);
    let rl = server.limiter().await;
    let k = key("top");
    for _ in 0..3 {
        rl.hit(&k, &Fixed::new(1, MINUTE)).await.unwrap();
    }
    let top = rl.top(&TopOptions { view: TopView::Denied, count: Some(5), reset: false }).await.unwrap();
    assert!(top.iter().any(|e| e.key == k && e.count == 2), "{top:?}");
    let library = Server::start(Kind::Library);
    let err = library.limiter().await.top(&TopOptions::default()).await.unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(ref m) if m.contains("needs the module")), "{err}");
}

#[tokio::test]
async fn the_library_is_loaded_once_and_again_when_flushed() {
    let server = Server::start(Kind::Library);
    let untouched = Limiter::without_library_load(RedisConnection::new(server.connection().await));
    assert!(matches!(untouched.hit(&key("x"), &Fixed::new(1, MINUTE)).await, Err(Error::LibraryNotLoaded)));
    let rl = server.limiter().await;
    assert!(rl.hit(&key("x"), &Fixed::new(1, MINUTE)).await.unwrap().allowed);
    let mut con = server.connection().await;
    let () = redis::cmd("FUNCTION").arg("FLUSH").query_async(&mut con).await.unwrap();
    assert!(rl.hit(&key("x"), &Fixed::new(1, MINUTE)).await.unwrap().allowed, "loaded again after FUNCTION FLUSH");
    assert_eq!(rl.backend().await.unwrap(), Backend::Library);
    // Loaded by hand, the limiter that would not load it uses it.
    assert!(untouched.hit(&key("x"), &Fixed::new(1, MINUTE)).await.unwrap().allowed);
}

#[tokio::test]
async fn refusals_are_typed() {
    for kind in KINDS {
        let server = Server::start(kind);
        let rl = server.limiter().await;
        let mut con = server.connection().await;
        let k = key("list");
        let _: i64 = redis::cmd("LPUSH").arg(&k).arg("x").query_async(&mut con).await.unwrap();
        let err = rl.hit(&k, &Fixed::new(1, MINUTE)).await.unwrap_err();
        assert!(matches!(err, Error::WrongType(_)), "{kind:?}: {err:?}");
        let err = rl.hit(&key("k"), &Fixed::new(0, MINUTE)).await.unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(ref m) if m == "limit must be an integer >= 1"), "{err:?}");
    }
}

#[tokio::test]
async fn an_unreachable_server_is_told_apart() {
    let mut server = Server::start(Kind::Module);
    let rl = server.limiter().await;
    rl.hit(&key("k"), &Fixed::new(1, MINUTE)).await.unwrap();
    server.kill();
    let err = rl.hit(&key("k"), &Fixed::new(1, MINUTE)).await.unwrap_err();
    assert!(err.is_unreachable(), "{err:?}");
}

#[tokio::test]
async fn pools_give_each_call_a_connection() {
    let mut server = Server::start(Kind::Module);
    let deadpool =
        deadpool_redis::Config::from_url(server.url()).create_pool(Some(deadpool_redis::Runtime::Tokio1)).unwrap();
    let from_deadpool = Limiter::new(RedisPool::new(move || {
        let pool = deadpool.clone();
        async move { pool.get().await }
    }));
    let manager = bb8_redis::RedisConnectionManager::new(server.url()).unwrap();
    let bb8 = bb8::Pool::builder().max_size(2).connection_timeout(Duration::from_secs(1)).build(manager).await.unwrap();
    let from_bb8 = Limiter::new(RedisPool::new(move || {
        let pool = bb8.clone();
        async move { pool.get_owned().await }
    }));
    let (k, f) = (key("pooled"), Fixed::new(2, MINUTE));
    assert!(from_deadpool.hit(&k, &f).await.unwrap().allowed);
    assert!(from_bb8.hit(&k, &f).await.unwrap().allowed);
    let denied = from_deadpool.hit(&k, &f).await.unwrap();
    assert!(!denied.allowed && denied.count == 2, "{denied:?}");
    let err = from_bb8.hit(&k, &Fixed::new(0, MINUTE)).await.unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");

    server.kill();
    for rl in [from_deadpool.hit(&k, &f).await, from_bb8.hit(&k, &f).await] {
        let err = rl.unwrap_err();
        assert!(err.is_unreachable(), "{err:?}");
    }
}

#[tokio::test]
async fn a_permit_is_renewed_while_held_and_released_on_drop() {
    let server = Server::start(Kind::Module);
    let rl = server.limiter().await;
    let k = key("permit");
    let lease = Duration::from_millis(1500);
    let permit = rl.hold(&k, 1, lease).await.unwrap();
    // Three leases later it is still held: renewed.
    tokio::time::sleep(lease * 3).await;
    assert!(!permit.is_lost());
    let busy = rl.hold(&k, 1, lease).await.unwrap_err();
    assert!(matches!(busy, Error::PermitUnavailable { in_use: 1, limit: 1, .. }), "{busy:?}");
    drop(permit);
    // The release runs on the runtime: the next acquire succeeds once it did.
    let mut again = None;
    for _ in 0..500 {
        if let Ok(p) = rl.hold(&k, 1, lease).await {
            again = Some(p);
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut again = again.expect("released on drop");
    let mut con = server.connection().await;
    let _: i64 = redis::cmd("DEL").arg(&k).query_async(&mut con).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), again.lost()).await.expect("the lost lease is seen");
    assert!(!again.release().await.unwrap());
}

#[tokio::test]
async fn hot_limits_share_one_key_never_over_and_give_back_on_close() {
    use redis_ratelimit_client::HotOptions;
    for kind in KINDS {
        let server = Server::start(kind);
        let k = key("hot");
        let f = Fixed::new(400, MINUTE);
        // Four processes' shares (each its own connection), 150 takes each: 600 asked of 400.
        let mut fleet = Vec::new();
        for _ in 0..4 {
            let rl = server.limiter().await;
            let hot = rl.hot(&k, &f, HotOptions::default());
            fleet.push(tokio::spawn(async move {
                let mut admitted = 0;
                for _ in 0..150 {
                    if hot.take(1).await.unwrap() {
                        admitted += 1;
                    }
                }
                hot.close().await.unwrap();
                admitted
            }));
        }
        let mut admitted = 0;
        for process in fleet {
            admitted += process.await.unwrap();
        }
        // Never over; what a process held unused when it finished (at most an eighth of the
        // limit a block) went back on close, so the counter is exactly what was admitted.
        assert!((200..=400).contains(&admitted), "{kind:?}: {admitted} admitted of 400");
        let rl = server.limiter().await;
        assert_eq!(rl.peek(&k, 400, 1).await.unwrap().count, admitted);

        // Under the limit, every take is admitted, and what was held unused is given back.
        let k = key("hot-under");
        let hot = rl.hot(&k, &Fixed::new(1000, MINUTE), HotOptions::default());
        for _ in 0..100 {
            assert!(hot.take(1).await.unwrap());
        }
        hot.close().await.unwrap();
        assert_eq!(rl.peek(&k, 1000, 1).await.unwrap().count, 100, "{kind:?}: the unused part settled back");
        assert!(matches!(hot.take(1).await, Err(Error::Closed)));
    }
}
