//! The limiter on a cluster of three primaries, with the module and with the library: over
//! redis-rs's async cluster connection, and (feature `fred`) over fred's cluster client.

#![cfg(feature = "redis-cluster")]

mod common;

use std::time::Duration;

use common::{key, Cluster, Kind, KINDS};
use redis::cluster::ClusterClient;
use redis_ratelimit_client::{
    slot, AllOptions, Backend, Error, Fixed, Limit, Limiter, RedisCluster, Transport, LIBRARY_NAME,
};

const MINUTE: Duration = Duration::from_secs(60);

#[tokio::test]
async fn every_call_reaches_its_keys_primary() {
    for kind in KINDS {
        let cluster = Cluster::start(kind);
        let client = ClusterClient::new(cluster.urls()).unwrap();
        let rl = Limiter::new(RedisCluster::new(client.get_async_connection().await.unwrap()));
        each_call_reaches_its_keys_primary(&cluster, &rl, "redis-rs").await;
        #[cfg(feature = "fred")]
        {
            let (first, rest) = cluster.urls().split_first().map(|(f, r)| (f.clone(), r.to_vec())).unwrap();
            let nodes: Vec<String> =
                rest.iter().map(|u| format!("node={}", &u["redis://".len()..u.len() - 1])).collect();
            let url = format!("redis-cluster{}?{}", &first["redis".len()..first.len() - 1], nodes.join("&"));
            let client = fred::prelude::Builder::from_config(fred::prelude::Config::from_url(&url).unwrap())
                .build_pool(2)
                .unwrap();
            fred::prelude::ClientLike::init(&client).await.unwrap();
            let rl = Limiter::new(redis_ratelimit_client::FredConnection::new(client));
            // The library is loaded again, by this limiter, on every primary.
            if kind == Kind::Library {
                for node in &cluster.nodes {
                    let () =
                        redis::cmd("FUNCTION").arg("FLUSH").query_async(&mut node.connection().await).await.unwrap();
                }
            }
            each_call_reaches_its_keys_primary(&cluster, &rl, "fred").await;
        }
    }
}

async fn each_call_reaches_its_keys_primary<T: Transport>(cluster: &Cluster, rl: &Limiter<T>, client: &str) {
    let kind = cluster.nodes[0].kind;
    let redirected = moved(cluster).await;
    // Keys over every primary.
    let keys: Vec<String> = (0..30).map(|i| key(&format!("c{i}"))).collect();
    for k in &keys {
        assert!(rl.hit(k, &Fixed::new(1, MINUTE)).await.unwrap().allowed, "{client} {kind:?} {k}");
        assert!(!rl.hit(k, &Fixed::new(1, MINUTE)).await.unwrap().allowed, "{client} {kind:?} {k}");
    }
    assert_eq!(rl.backend().await.unwrap(), if kind == Kind::Module { Backend::Module } else { Backend::Library });

    // HITALL names its key count first: routed by its first key all the same.
    let tag = (0..100).map(|i| format!("{{t{i}}}")).find(|t| slot(t) != slot("2")).unwrap();
    let limits = [Limit::new(key(&format!("{tag}:a")), 1, MINUTE), Limit::new(key(&format!("{tag}:b")), 2, MINUTE)];
    assert!(rl.hit_all(&limits, &AllOptions::new()).await.unwrap().allowed, "{client}");
    assert!(!rl.hit_all(&limits, &AllOptions::new()).await.unwrap().allowed, "{client}");

    // Keys of several slots are refused before anything is sent.
    let (a, b) = ("{x}a".to_string(), "{y}b".to_string());
    assert_ne!(slot(&a), slot(&b));
    let err = rl.hit_all(&[Limit::new(&a, 1, MINUTE), Limit::new(&b, 1, MINUTE)], &AllOptions::new()).await;
    assert!(matches!(err, Err(Error::CrossSlot(_))), "{client} {err:?}");

    // Each call went straight to its slot's primary: none was answered MOVED (and followed).
    assert_eq!(moved(cluster).await, redirected, "{client}: calls were redirected");

    if kind == Kind::Library {
        // Loaded on every primary, each of which answers its own slots' calls.
        for node in &cluster.nodes {
            let mut con = node.connection().await;
            let listing: redis::Value = redis::cmd("FUNCTION")
                .arg("LIST")
                .arg("LIBRARYNAME")
                .arg(LIBRARY_NAME)
                .query_async(&mut con)
                .await
                .unwrap();
            assert!(format!("{listing:?}").contains(LIBRARY_NAME), "{client}: not loaded on {}", node.port);
        }
    }
}

/// The MOVED replies the primaries have sent (their error stats).
async fn moved(cluster: &Cluster) -> u64 {
    let mut total = 0;
    for node in &cluster.nodes {
        let info: String =
            redis::cmd("INFO").arg("errorstats").query_async(&mut node.connection().await).await.unwrap();
        let count = info
            .lines()
            .find_map(|l| l.strip_prefix("errorstat_MOVED:count="))
            .map_or(0, |n| n.trim().parse().unwrap());
        total += count;
    }
    total
}
