//! A stand-in for the `testcontainers` crate, as much of it as redis-cell-rs's own tests use:
//! "starting a container" of the image `redis-cell` or `valkey-cell` starts a local server
//! (`REDIS_SERVER`, `VALKEY_SERVER` for valkey-cell) with the redis-ratelimit module
//! (`RATELIMIT_MODULE`, loaded with `CL.THROTTLE`: redis-cell's command, answered alike), on a free loopback
//! port; dropping the container stops it. No Docker: the peers' suites run where ours do.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What starting a container can fail with.
#[derive(Debug)]
pub struct TestcontainersError(pub String);

impl std::fmt::Display for TestcontainersError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TestcontainersError {}

pub mod core {
    /// A container's port.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct ContainerPort(pub u16);

    /// `6379.tcp()`.
    pub trait IntoContainerPort {
        /// The TCP port.
        fn tcp(self) -> ContainerPort;
    }

    impl IntoContainerPort for u16 {
        fn tcp(self) -> ContainerPort {
            ContainerPort(self)
        }
    }

    impl From<u16> for ContainerPort {
        fn from(port: u16) -> ContainerPort {
            ContainerPort(port)
        }
    }

    /// What the container is waited for: here, the server answering on its port.
    #[derive(Debug, Clone)]
    pub enum WaitFor {
        /// A line of the server's log.
        Message(String),
    }

    impl WaitFor {
        /// The server's "Ready to accept connections".
        pub fn message_on_stdout(message: impl Into<String>) -> WaitFor {
            WaitFor::Message(message.into())
        }
    }
}

pub mod runners {
    use std::future::Future;

    use crate::{ContainerAsync, GenericImage, TestcontainersError};

    /// `image.start().await`.
    pub trait AsyncRunner<I> {
        /// Starts the image's server.
        fn start(self) -> impl Future<Output = Result<ContainerAsync<I>, TestcontainersError>> + Send;
    }

    impl AsyncRunner<GenericImage> for GenericImage {
        async fn start(self) -> Result<ContainerAsync<GenericImage>, TestcontainersError> {
            crate::start(&self.name)
        }
    }
}

/// An image by name; `redis-cell` and `valkey-cell` (under any registry) are the ones this
/// stand-in knows.
#[derive(Debug, Clone)]
pub struct GenericImage {
    name: String,
}

impl GenericImage {
    /// The image `name:tag`.
    pub fn new(name: impl Into<String>, _tag: impl Into<String>) -> GenericImage {
        GenericImage { name: name.into() }
    }

    /// Exposes a port (every server's port is exposed here).
    pub fn with_exposed_port(self, _port: core::ContainerPort) -> GenericImage {
        self
    }

    /// Waits for the server (it is always waited for until it answers).
    pub fn with_wait_for(self, _wait: core::WaitFor) -> GenericImage {
        self
    }
}

/// A started server.
#[derive(Debug)]
pub struct ContainerAsync<I> {
    child: Child,
    port: u16,
    dir: std::path::PathBuf,
    image: std::marker::PhantomData<I>,
}

impl<I> ContainerAsync<I> {
    /// The host's port for the container's (its one port).
    pub async fn get_host_port_ipv4(&self, _port: impl Into<core::ContainerPort>) -> Result<u16, TestcontainersError> {
        Ok(self.port)
    }
}

impl<I> Drop for ContainerAsync<I> {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).unwrap_or(0)
}

fn start<I>(image: &str) -> Result<ContainerAsync<I>, TestcontainersError> {
    let fail = |what: String| TestcontainersError(format!("{image}: {what}"));
    let variable = match image.rsplit('/').next().unwrap_or(image) {
        "redis-cell" => "REDIS_SERVER",
        "valkey-cell" => "VALKEY_SERVER",
        other => return Err(fail(format!("no such image here ({other})"))),
    };
    let binary = std::env::var(variable)
        .or_else(|_| std::env::var("REDIS_SERVER"))
        .map_err(|_| fail(format!("{variable} unset")))?;
    let module = std::env::var("RATELIMIT_MODULE").map_err(|_| fail("RATELIMIT_MODULE unset".into()))?;
    let port = free_port();
    let dir = std::env::temp_dir().join(format!("testcontainers-{image}-{}-{port}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| fail(e.to_string()))?;
    let child = Command::new(&binary)
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(&dir)
        .args(["--loadmodule", &module, "CL.THROTTLE"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| fail(format!("{binary}: {e}")))?;
    let container = ContainerAsync { child, port, dir, image: std::marker::PhantomData };
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            return Err(fail("the server did not start".into()));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(container)
}
