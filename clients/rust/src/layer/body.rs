//! The layer's response body: the inner service's (holding a permit until it ends), or a
//! denial's.

use std::any::Any;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

/// Something held until the body ends (an in-flight permit).
pub(crate) type Guard = Box<dyn Any + Send + Sync>;

pin_project! {
    /// The body of a response that went through the layer.
    pub struct ResponseBody<B> {
        #[pin]
        kind: Kind<B>,
    }
}

pin_project! {
    #[project = Projected]
    enum Kind<B> {
        // The inner service's body, and what is held until it ends.
        Inner { #[pin] body: B, guard: Option<Guard> },
        // A denial's body.
        Full { bytes: Option<Bytes> },
    }
}

impl<B> ResponseBody<B> {
    pub(crate) fn inner(body: B, guard: Option<Guard>) -> ResponseBody<B> {
        ResponseBody { kind: Kind::Inner { body, guard } }
    }

    pub(crate) fn full(bytes: Bytes) -> ResponseBody<B> {
        ResponseBody { kind: Kind::Full { bytes: (!bytes.is_empty()).then_some(bytes) } }
    }
}

impl<B> std::fmt::Debug for ResponseBody<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.kind {
            Kind::Inner { .. } => "ResponseBody::Inner",
            Kind::Full { .. } => "ResponseBody::Full",
        })
    }
}

impl<B: Body<Data = Bytes>> Body for ResponseBody<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        match self.project().kind.project() {
            Projected::Inner { body, guard } => {
                let frame = std::task::ready!(body.poll_frame(cx));
                if frame.is_none() {
                    // The body ended: the permit goes now, not when the handler returned.
                    guard.take();
                }
                Poll::Ready(frame)
            }
            Projected::Full { bytes } => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Inner { body, .. } => body.is_end_stream(),
            Kind::Full { bytes } => bytes.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Inner { body, .. } => body.size_hint(),
            Kind::Full { bytes } => SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64)),
        }
    }
}
