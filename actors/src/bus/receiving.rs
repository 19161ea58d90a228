//! Reading the bus's channel of every event: what is queued is taken directly, and only an
//! empty channel is waited on.

use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::sync::broadcast;
use tokio_util::sync::ReusableBoxFuture;

use super::Envelope;

/// The channel's receiving end: events already queued are taken directly, and only an empty
/// channel is waited on, through a future that holds the receiver meanwhile (the channel has
/// no poll method), boxed once and reused.
pub(super) struct Receiving {
    /// The receiver, while no wait is under way.
    idle: Option<broadcast::Receiver<Arc<Envelope>>>,
    /// The wait, once one was needed; it hands the receiver back when an event comes.
    wait: ReusableBoxFuture<'static, Received>,
    /// A wait is under way.
    waiting: bool,
}

/// What a wait for the next event gives: its outcome and the receiver.
type Received = (
    Result<Arc<Envelope>, broadcast::error::RecvError>,
    Option<broadcast::Receiver<Arc<Envelope>>>,
);

/// Waits for the next event on `receiver` and hands it back.
async fn next(receiver: Option<broadcast::Receiver<Arc<Envelope>>>) -> Received {
    match receiver {
        Some(mut receiver) => (receiver.recv().await, Some(receiver)),
        None => (Err(broadcast::error::RecvError::Closed), None),
    }
}

impl Receiving {
    pub(super) fn new(receiver: broadcast::Receiver<Arc<Envelope>>) -> Self {
        Receiving {
            idle: Some(receiver),
            wait: ReusableBoxFuture::new(next(None)),
            waiting: false,
        }
    }

    /// The next event in the channel, or `Pending` with `cx`'s waker registered.
    pub(super) fn poll_recv(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Arc<Envelope>, broadcast::error::RecvError>> {
        use broadcast::error::{RecvError, TryRecvError};
        if !self.waiting {
            let Some(receiver) = &mut self.idle else {
                return Poll::Ready(Err(RecvError::Closed));
            };
            match receiver.try_recv() {
                Ok(envelope) => return Poll::Ready(Ok(envelope)),
                Err(TryRecvError::Lagged(n)) => return Poll::Ready(Err(RecvError::Lagged(n))),
                Err(TryRecvError::Closed) => return Poll::Ready(Err(RecvError::Closed)),
                Err(TryRecvError::Empty) => {
                    self.wait.set(next(self.idle.take()));
                    self.waiting = true;
                }
            }
        }
        let (result, receiver) = std::task::ready!(self.wait.poll(cx));
        self.idle = receiver;
        self.waiting = false;
        Poll::Ready(result)
    }
}

#[cfg(test)]
mod tests {
    use std::task::Waker;

    use super::*;

    fn envelope(seq: u64) -> Arc<Envelope> {
        crate::bus::test_envelope(seq)
    }

    fn seq(polled: Poll<Result<Arc<Envelope>, broadcast::error::RecvError>>) -> Option<u64> {
        match polled {
            Poll::Ready(Ok(e)) => Some(e.seq),
            _ => None,
        }
    }

    #[test]
    fn takes_queued_events_waits_when_empty_and_reports_lag_and_close() {
        let (tx, rx) = broadcast::channel(4);
        let mut receiving = Receiving::new(rx);
        let mut cx = Context::from_waker(Waker::noop());
        tx.send(envelope(1)).unwrap();
        assert_eq!(seq(receiving.poll_recv(&mut cx)), Some(1));
        // Empty: a wait starts and holds the receiver until the next event.
        assert!(receiving.poll_recv(&mut cx).is_pending());
        tx.send(envelope(2)).unwrap();
        assert_eq!(seq(receiving.poll_recv(&mut cx)), Some(2));
        for n in 3..=8 {
            tx.send(envelope(n)).unwrap();
        }
        assert!(matches!(
            receiving.poll_recv(&mut cx),
            Poll::Ready(Err(broadcast::error::RecvError::Lagged(2)))
        ));
        assert_eq!(seq(receiving.poll_recv(&mut cx)), Some(5));
        drop(tx);
        for n in 6..=8 {
            assert_eq!(seq(receiving.poll_recv(&mut cx)), Some(n));
        }
        assert!(matches!(
            receiving.poll_recv(&mut cx),
            Poll::Ready(Err(broadcast::error::RecvError::Closed))
        ));
    }
}
