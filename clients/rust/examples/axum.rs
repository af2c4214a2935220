//! An axum server limited to 2 requests a minute per client, on the server `make run` starts
//! (redis://127.0.0.1:6380/, or REDIS_URL), serving on 127.0.0.1:4000 (or the address given):
//!
//!     cargo run --all-features --example axum
//!     curl -i localhost:4000/    # the third time in a minute: 429 Too Many Requests

use std::net::SocketAddr;
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use redis_ratelimit_client::layer::{ClientIp, RateLimitLayer, Rule};
use redis_ratelimit_client::{Limiter, RedisConnection};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let redis_url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6380/".to_string());
    let address = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:4000".to_string());
    let client = redis::Client::open(redis_url)?;
    let limiter = Limiter::new(RedisConnection::new(client.get_multiplexed_async_connection().await?));
    let layer =
        RateLimitLayer::new(limiter).key(ClientIp::new()).rule(Rule::fixed(2, Duration::from_secs(60)).name("api"));
    let app = Router::new().route("/", get(|| async { "hello\n" })).layer(layer);
    let listener = tokio::net::TcpListener::bind(address.replace("localhost", "127.0.0.1")).await?;
    axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await?;
    Ok(())
}
