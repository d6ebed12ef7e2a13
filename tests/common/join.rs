//! Awaiting many futures from one task, polled in the order given: how a test makes calls
//! "at once" whose order of arrival is still the order they were made (spawned tasks start
//! in whatever order the scheduler picks).

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

/// Await every future, polling them in the order given (as one task driving a join does):
/// each call's first poll happens before the next call's.
pub async fn join_in_order<T>(
    mut futures: Vec<Pin<Box<dyn Future<Output = T> + Send + '_>>>,
) -> Vec<T> {
    let mut out: Vec<Option<T>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (i, f) in futures.iter_mut().enumerate() {
            if out[i].is_some() {
                continue;
            }
            match f.as_mut().poll(cx) {
                Poll::Ready(v) => out[i] = Some(v),
                Poll::Pending => pending = true,
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    out.into_iter()
        .map(|v| v.expect("every future ended"))
        .collect()
}
