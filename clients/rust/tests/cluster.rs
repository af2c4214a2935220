//! The limiter on a cluster of three primaries (redis-rs's async cluster connection), with the
//! module and with the library.

#![cfg(feature = "redis-cluster")]

mod common;

use std::time::Duration;

use common::{key, Cluster, Kind, KINDS};
use redis::cluster::ClusterClient;
use redis_ratelimit_client::{slot, AllOptions, Backend, Error, Fixed, Limit, Limiter, RedisCluster, LIBRARY_NAME};

const MINUTE: Duration = Duration::from_secs(60);

#[tokio::test]
async fn every_call_reaches_its_keys_primary() {
    for kind in KINDS {
        let cluster = Cluster::start(kind);
        let client = ClusterClient::new(cluster.urls()).unwrap();
        let rl = Limiter::new(RedisCluster::new(client.get_async_connection().await.unwrap()));
        // Keys over every primary.
        let keys: Vec<String> = (0..30).map(|i| key(&format!("c{i}"))).collect();
        for k in &keys {
            assert!(rl.hit(k, &Fixed::new(1, MINUTE)).await.unwrap().allowed, "{kind:?} {k}");
            assert!(!rl.hit(k, &Fixed::new(1, MINUTE)).await.unwrap().allowed);
        }
        assert_eq!(rl.backend().await.unwrap(), if kind == Kind::Module { Backend::Module } else { Backend::Library });

        // HITALL names its key count first: routed by its first key all the same.
        let tag = (0..100).map(|i| format!("{{t{i}}}")).find(|t| slot(t) != slot("2")).unwrap();
        let limits = [Limit::new(format!("{tag}:a"), 1, MINUTE), Limit::new(format!("{tag}:b"), 2, MINUTE)];
        assert!(rl.hit_all(&limits, &AllOptions::new()).await.unwrap().allowed);
        assert!(!rl.hit_all(&limits, &AllOptions::new()).await.unwrap().allowed);

        // Keys of several slots are refused before anything is sent.
        let (a, b) = ("{x}a".to_string(), "{y}b".to_string());
        assert_ne!(slot(&a), slot(&b));
        let err = rl.hit_all(&[Limit::new(&a, 1, MINUTE), Limit::new(&b, 1, MINUTE)], &AllOptions::new()).await;
        assert!(matches!(err, Err(Error::CrossSlot(_))), "{err:?}");

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
                assert!(format!("{listing:?}").contains(LIBRARY_NAME), "not loaded on {}", node.port);
            }
        }
    }
}
