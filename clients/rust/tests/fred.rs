//! The limiter over fred 10 (`FredConnection`) against real servers, with the module and with
//! the library: its calls, its refusals by variant, the library's loading and reload, an outage.
//! On a cluster: tests/cluster.rs.

#![cfg(feature = "fred")]

mod common;

use std::time::Duration;

use common::{free_port, key, Kind, Server, KINDS};
use fred::prelude::{Builder, ClientLike, Config};
use redis_ratelimit_client::{AllOptions, Backend, Error, Fixed, FredConnection, Limit, Limiter, Rate};

const MINUTE: Duration = Duration::from_secs(60);

async fn fred_client(url: &str) -> fred::prelude::Client {
    let client = Builder::from_config(Config::from_url(url).unwrap())
        .with_performance_config(|perf| perf.default_command_timeout = Duration::from_secs(5))
        .build()
        .unwrap();
    client.init().await.unwrap();
    client
}

#[tokio::test]
async fn fred_decides_refuses_and_loads_the_library() {
    for kind in KINDS {
        let server = Server::start_with(kind, free_port(), &[]);
        let client = fred_client(&format!("redis://127.0.0.1:{}/", server.port)).await;
        let rl = Limiter::new(FredConnection::new(client.clone()));
        let k = key("fred");
        let f = Fixed::new(1, MINUTE);
        assert!(rl.hit(&k, &f).await.unwrap().allowed, "{kind:?}");
        let denied = rl.hit(&k, &f).await.unwrap();
        assert!(!denied.allowed && denied.retry_after.unwrap() <= MINUTE, "{kind:?} {denied:?}");
        assert!(rl.gcra(&key("g"), &Rate::new(1, 2, MINUTE)).await.unwrap().allowed);

        let limits = [Limit::new(key("{f}:r"), 10, MINUTE), Limit::new(key("{f}:t"), 1000, MINUTE)];
        let reserved = rl.reserve_all(&limits, &AllOptions::new().with_tokens(300, 1)).await.unwrap();
        assert!(reserved.decision.allowed);
        let settled = rl.settle_all(&reserved, 120).await.unwrap();
        assert_eq!((settled[0].applied, settled[0].decision.count), (-180, 120));

        let list = key("list");
        let _: i64 = client.custom(fred::cmd!("LPUSH"), vec![list.clone(), "x".to_string()]).await.unwrap();
        let err = rl.hit(&list, &f).await.unwrap_err();
        assert!(matches!(err, Error::WrongType(_)), "{kind:?}: {err:?}");

        assert_eq!(rl.backend().await.unwrap(), if kind == Kind::Module { Backend::Module } else { Backend::Library });
        if kind == Kind::Library {
            let _: String = client.custom(fred::cmd!("FUNCTION"), vec!["FLUSH"]).await.unwrap();
            assert!(rl.hit(&key("x"), &f).await.unwrap().allowed, "loaded again after FUNCTION FLUSH");
        }
    }
}

#[tokio::test]
async fn fred_an_unreachable_server_is_told_apart() {
    let mut server = Server::start_with(Kind::Module, free_port(), &[]);
    let rl = Limiter::new(FredConnection::new(fred_client(&format!("redis://127.0.0.1:{}/", server.port)).await));
    rl.hit(&key("k"), &Fixed::new(1, MINUTE)).await.unwrap();
    server.kill();
    let err = rl.hit(&key("k"), &Fixed::new(1, MINUTE)).await.unwrap_err();
    assert!(err.is_unreachable(), "{err:?}");
}
