#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(missing_docs)]

mod command;
mod error;
#[cfg(feature = "fred")]
mod fred_client;
#[cfg(feature = "tokio")]
mod hot;
#[cfg(all(test, feature = "tokio"))]
mod hot_simulation;
#[cfg(feature = "tokio")]
mod hot_state;
mod limiter;
mod limits;
#[cfg(feature = "tokio")]
mod permit;
mod provider;
mod reply;
mod results;
mod slot;
mod transport;

#[cfg(feature = "redis")]
mod redis_rs;

#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub mod layer;

pub use error::Error;
#[cfg(feature = "fred")]
#[cfg_attr(docsrs, doc(cfg(feature = "fred")))]
pub use fred_client::FredConnection;
#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
pub use hot::{HotLimit, HotOptions};
pub use limiter::{Backend, Limiter, LIBRARY_NAME, LIBRARY_SOURCE};
pub use limits::{Adaptive, AllOptions, Calendar, Fixed, Limit, Rate, Report, Sliding, TopOptions, TopView, Window};
#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
pub use permit::Permit;
pub use provider::{read_answer, ProviderAnswer, Stated};
pub use reply::Reply;
pub use results::{
    combined_headers, Acquisition, Decision, Grant, Learned, MultiDecision, MultiReservation, Reservation, Settlement,
    TopEntry, FOREVER,
};
pub use slot::slot;
pub use transport::Transport;

#[cfg(feature = "redis-cluster")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis-cluster")))]
pub use redis_rs::RedisCluster;
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub use redis_rs::{RedisConnection, RedisPool};
