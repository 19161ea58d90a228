//! Relaying a parent call's cancel to a child run on another arbiter: the child's token is its
//! own, and a task on the child's arbiter cancels it after the call's, so that a cancelled
//! tree's tokens are cancelled (and their tasks woken) by the arbiter they belong to.

use tokio_util::sync::CancellationToken;

/// Cancels `token` once `upstream` is cancelled, on the calling thread; ends unrun when aborted
/// (the loop is over first).
pub(super) fn spawn_relay(
    upstream: CancellationToken,
    token: CancellationToken,
) -> tokio::task::AbortHandle {
    tokio::spawn(async move {
        tokio::select! {
            () = upstream.cancelled() => token.cancel(),
            () = token.cancelled() => {}
        }
    })
    .abort_handle()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_relay_cancels_its_token_once_the_upstream_is_cancelled() {
        let upstream = CancellationToken::new();
        let token = CancellationToken::new();
        let _relay = spawn_relay(upstream.clone(), token.clone());
        tokio::task::yield_now().await;
        assert!(!token.is_cancelled(), "nothing to relay yet");
        upstream.cancel();
        tokio::time::timeout(Duration::from_secs(1), token.cancelled())
            .await
            .expect("the cancel is relayed");
    }
}
