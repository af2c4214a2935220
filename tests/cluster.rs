//! A real Redis Cluster on loopback: 3 primaries + 3 replicas, the module on every node, joined
//! with `redis-cli --cluster create`. Routing, MOVED, hash tags, resharding a slot of live
//! counters, failover, and AUDIT/REPAIR fanned out over the primaries.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{audit, error_of, info_field, repair, value_and_expiry, wait_for, Config, Server};
use redis::cluster::{ClusterClient, ClusterConnection};
use redis::Connection;

struct Node {
    id: String,
    port: u16,
    primary_id: Option<String>,
}

struct Cluster {
    servers: Vec<Server>,
}

impl Cluster {
    fn start() -> Cluster {
        let servers: Vec<Server> = (0..6).map(|_| Server::with(Config { cluster: true, ..Config::default() })).collect();
        let mut create = Command::new("redis-cli");
        create.args(["--cluster", "create"]);
        for s in &servers {
            create.arg(format!("127.0.0.1:{}", s.port));
        }
        let out = create.args(["--cluster-replicas", "1", "--cluster-yes"]).output().expect("run redis-cli");
        assert!(out.status.success(), "cluster create failed: {}", String::from_utf8_lossy(&out.stdout));
        let cluster = Cluster { servers };
        cluster.wait_healthy();
        cluster
    }

    /// Every node sees a healthy cluster and every replica is in sync.
    fn wait_healthy(&self) {
        for s in &self.servers {
            let mut con = s.connect();
            wait_for("cluster_state:ok", Duration::from_secs(60), || {
                let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut con).unwrap();
                info.contains("cluster_state:ok")
            });
            wait_for("replica in sync", Duration::from_secs(60), || {
                info_field(&mut con, "replication", "role").as_deref() == Some("master")
                    || info_field(&mut con, "replication", "master_link_status").as_deref() == Some("up")
            });
        }
    }

    fn nodes(&self) -> Vec<Node> {
        let mut con = self.servers[0].connect();
        let text: String = redis::cmd("CLUSTER").arg("NODES").query(&mut con).unwrap();
        text.lines()
            .map(|line| {
                let f: Vec<&str> = line.split(' ').collect();
                let port = f[1].split('@').next().unwrap().rsplit(':').next().unwrap().parse().unwrap();
                let primary_id = (f[3] != "-").then(|| f[3].to_string());
                Node { id: f[0].to_string(), port, primary_id }
            })
            .collect()
    }

    /// The nodes that are primaries by their own account (gossip may lag after a failover).
    fn primaries(&self) -> Vec<Node> {
        self.servers
            .iter()
            .filter_map(|s| {
                let mut con = s.connect();
                (info_field(&mut con, "replication", "role").as_deref() == Some("master")).then(|| {
                    let id: String = redis::cmd("CLUSTER").arg("MYID").query(&mut con).unwrap();
                    Node { id, port: s.port, primary_id: None }
                })
            })
            .collect()
    }

    fn client(&self) -> ClusterConnection {
        let urls: Vec<String> = self.servers.iter().map(Server::url).collect();
        ClusterClient::new(urls).unwrap().get_connection().unwrap()
    }

    fn node_connection(&self, port: u16) -> Connection {
        self.servers.iter().find(|s| s.port == port).expect("a node of this cluster").connect()
    }

    /// The primary that serves `key`'s slot.
    fn owner(&self, key: &str) -> Node {
        let mut con = self.servers[0].connect();
        let slot: i64 = redis::cmd("CLUSTER").arg("KEYSLOT").arg(key).query(&mut con).unwrap();
        // Each entry: start, end, then the primary as [ip, port, id, ...], then its replicas.
        let slots: Vec<Vec<redis::Value>> = redis::cmd("CLUSTER").arg("SLOTS").query(&mut con).unwrap();
        let entry = slots
            .into_iter()
            .find(|e| {
                let (lo, hi): (i64, i64) = (redis::from_redis_value(&e[0]).unwrap(), redis::from_redis_value(&e[1]).unwrap());
                (lo..=hi).contains(&slot)
            })
            .unwrap();
        let primary: Vec<redis::Value> = redis::from_redis_value(&entry[2]).unwrap();
        let port: u16 = redis::from_redis_value(&primary[1]).unwrap();
        let id: String = redis::from_redis_value(&primary[2]).unwrap();
        Node { id, port, primary_id: None }
    }
}

fn hit(con: &mut impl redis::ConnectionLike, key: &str, args: &[&str]) -> Vec<i64> {
    redis::cmd("RATELIMIT.HIT").arg(key).arg(args).query(con).unwrap()
}

fn gcra(con: &mut impl redis::ConnectionLike, key: &str, args: &[&str]) -> Vec<i64> {
    redis::cmd("RATELIMIT.GCRA").arg(key).arg(args).query(con).unwrap()
}

#[test]
fn a_cluster_keeps_every_promise() {
    let cluster = Cluster::start();
    let mut client = cluster.client();
    keys_spread_over_every_primary(&cluster, &mut client);
    a_wrong_node_answers_moved(&cluster);
    hash_tags_keep_keys_together(&cluster, &mut client);
    resharding_moves_live_counters(&cluster, &mut client);
    failover_keeps_counters_and_expiry_instants(&cluster, &mut client);
    audit_and_repair_fan_out_over_primaries(&cluster, &mut client);
}

fn keys_spread_over_every_primary(cluster: &Cluster, client: &mut ClusterConnection) {
    for round in 1..=3 {
        for i in 0..300 {
            assert_eq!(hit(client, &format!("spread:{i}"), &["100", "3600"])[..2], [1, round]);
            assert_eq!(gcra(client, &format!("gspread:{i}"), &["9", "1", "3600"])[..3], [0, 10, 10 - round]);
        }
    }
    for primary in cluster.primaries() {
        let mut con = cluster.node_connection(primary.port);
        let dbsize: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
        assert!(dbsize > 50, "primary {} holds only {dbsize} of 300 counters", primary.port);
    }
}

fn a_wrong_node_answers_moved(cluster: &Cluster) {
    let owner = cluster.owner("spread:1");
    let other = cluster.primaries().into_iter().find(|n| n.id != owner.id).unwrap();
    let mut con = cluster.node_connection(other.port);
    let error = error_of(common::hit(&mut con, "spread:1", &["100", "3600"]));
    assert!(error.starts_with("MOVED") && error.ends_with(&format!(":{}", owner.port)), "{error}");
}

fn hash_tags_keep_keys_together(cluster: &Cluster, client: &mut ClusterConnection) {
    hit(client, "{user:42}:second", &["10", "1"]);
    hit(client, "{user:42}:hour", &["1000", "3600"]);
    let mut con = cluster.node_connection(cluster.owner("{user:42}").port);
    let together: i64 = redis::cmd("EXISTS").arg(&["{user:42}:second", "{user:42}:hour"]).query(&mut con).unwrap();
    assert_eq!(together, 2, "one hash tag, one node");

    // HITALL's keys must share a slot: with one hash tag it counts, across slots Redis refuses it.
    let tagged = ["2", "{user:7}:second", "{user:7}:hour", "10", "1", "1000", "3600"];
    let reply: Vec<redis::Value> = redis::cmd("RATELIMIT.HITALL").arg(&tagged).query(client).unwrap();
    assert_eq!(reply[0], redis::Value::Int(1));
    let mut owner = cluster.node_connection(cluster.owner("{user:7}").port);
    let crossing = ["2", "user:7:second", "user:8:hour", "10", "1", "1000", "3600"];
    let error = error_of(redis::cmd("RATELIMIT.HITALL").arg(&crossing).query::<redis::Value>(&mut owner));
    assert!(error.starts_with("CROSSSLOT"), "{error}");
}

fn resharding_moves_live_counters(cluster: &Cluster, client: &mut ClusterConnection) {
    let keys: Vec<String> = (0..20).map(|i| format!("{{moving}}:{i}")).collect();
    for (i, key) in keys.iter().enumerate() {
        for _ in 0..=i {
            hit(client, key, &["100", "3600"]);
        }
    }
    let source = cluster.owner("{moving}");
    let target = cluster.primaries().into_iter().find(|n| n.id != source.id).unwrap();
    let mut src = cluster.node_connection(source.port);
    let mut dst = cluster.node_connection(target.port);
    let before: Vec<_> = keys.iter().map(|k| value_and_expiry(&mut src, k)).collect();

    let slot: i64 = redis::cmd("CLUSTER").arg("KEYSLOT").arg("{moving}").query(&mut src).unwrap();
    let _: () = redis::cmd("CLUSTER").arg("SETSLOT").arg(slot).arg("IMPORTING").arg(&source.id).query(&mut dst).unwrap();
    let _: () = redis::cmd("CLUSTER").arg("SETSLOT").arg(slot).arg("MIGRATING").arg(&target.id).query(&mut src).unwrap();
    let in_slot: Vec<String> = redis::cmd("CLUSTER").arg("GETKEYSINSLOT").arg(slot).arg(100).query(&mut src).unwrap();
    assert_eq!(in_slot.len(), keys.len());
    let _: () = redis::cmd("MIGRATE")
        .arg(&["127.0.0.1", &target.port.to_string(), "", "0", "5000", "KEYS"])
        .arg(&in_slot)
        .query(&mut src)
        .unwrap();
    for node in cluster.primaries() {
        let mut con = cluster.node_connection(node.port);
        let _: () = redis::cmd("CLUSTER").arg("SETSLOT").arg(slot).arg("NODE").arg(&target.id).query(&mut con).unwrap();
    }
    assert_eq!(cluster.owner("{moving}").id, target.id);
    for (key, (value, expiry)) in keys.iter().zip(&before) {
        let (moved_value, moved_expiry) = value_and_expiry(&mut dst, key);
        assert_eq!(&moved_value, value, "{key} kept its value");
        // MIGRATE carries the remaining TTL, so the instant may move by the transfer time.
        assert!((moved_expiry - expiry).abs() < 1_000, "{key}: expiry {expiry} became {moved_expiry}");
    }
    // The client follows MOVED to the new owner and the counters go on counting.
    assert_eq!(hit(client, &keys[0], &["100", "3600"])[..2], [1, 2]);
    assert_eq!(hit(client, &keys[19], &["100", "3600"])[..2], [1, 21]);
}

fn failover_keeps_counters_and_expiry_instants(cluster: &Cluster, client: &mut ClusterConnection) {
    let keys: Vec<String> = (0..10).map(|i| format!("{{failing}}:{i}")).collect();
    for key in &keys {
        hit(client, key, &["100", "3600"]);
        hit(client, key, &["100", "3600"]);
        gcra(client, &format!("{key}:gcra"), &["9", "1", "3600"]);
    }
    let keys: Vec<String> = keys.iter().flat_map(|k| [k.clone(), format!("{k}:gcra")]).collect();
    let old = cluster.owner("{failing}");
    let replica = cluster.nodes().into_iter().find(|n| n.primary_id.as_deref() == Some(&old.id)).unwrap();
    let mut primary = cluster.node_connection(old.port);
    let before: Vec<_> = keys.iter().map(|k| value_and_expiry(&mut primary, k)).collect();
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(&mut primary).unwrap();
    assert_eq!(acked, 1);

    let mut promoted = cluster.node_connection(replica.port);
    let _: () = redis::cmd("CLUSTER").arg("FAILOVER").query(&mut promoted).unwrap();
    wait_for("the replica's promotion", Duration::from_secs(30), || {
        info_field(&mut promoted, "replication", "role").as_deref() == Some("master")
    });
    cluster.wait_healthy();
    wait_for("the cluster to see the new owner", Duration::from_secs(30), || cluster.owner("{failing}").id == replica.id);
    for (key, want) in keys.iter().zip(&before) {
        assert_eq!(&value_and_expiry(&mut promoted, key), want, "{key}: same value, same expiry instant");
    }
    assert_eq!(hit(client, &keys[0], &["100", "3600"])[..2], [1, 3], "HIT goes on on the promoted node");
    assert_eq!(gcra(client, &keys[1], &["9", "1", "3600"])[..3], [0, 10, 8], "and GCRA");
}

fn audit_and_repair_fan_out_over_primaries(cluster: &Cluster, client: &mut ClusterConnection) {
    for i in 0..30 {
        let _: () = redis::cmd("SET").arg(format!("leak:{i}")).arg(i + 1).query(client).unwrap();
    }
    let sum_over_primaries = |command: &str| -> (i64, i64) {
        let (mut matched, mut found) = (0, 0);
        for node in cluster.primaries() {
            let mut con = cluster.node_connection(node.port);
            let reply = match command {
                "AUDIT" => audit(&mut con, &["leak:"]).unwrap(),
                _ => repair(&mut con, &["leak:", "3600"]).unwrap(),
            };
            matched += reply.matched;
            found += reply.found;
        }
        (matched, found)
    };
    assert_eq!(sum_over_primaries("AUDIT"), (30, 30));

    // The same fan-out with redis-cli, as the README shows it.
    let out = Command::new("redis-cli")
        .args(["--cluster", "call", &format!("127.0.0.1:{}", cluster.servers[0].port)])
        .args(["RATELIMIT.AUDIT", "leak:", "LIMIT", "0", "--cluster-only-masters"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.matches("leaked").count() == 3, "{text}");

    assert_eq!(sum_over_primaries("REPAIR"), (30, 30));
    assert_eq!(sum_over_primaries("AUDIT"), (30, 0));
}
