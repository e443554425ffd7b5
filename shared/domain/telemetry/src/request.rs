//! The request a line belongs to, kept in a task-local rather than a
//! tracing span.
//!
//! Every line written while the API handles a request carries the request's
//! method, path, id and (once the caller is known) organization, as the
//! `span` object `{"method","path","request_id","org","name":"request"}`.
//! A tracing span gave the same lines, but it cost a registry slot, its
//! fields formatted into a string, a filter check on every poll and a
//! re-format when the organization was recorded: with one span per request
//! that was about a fifth of a warm read's work (issue 16). The task-local
//! costs a few pointer moves per poll and nothing when nothing is logged.
//!
//! It follows the request's own task only: work handed to `tokio::spawn`
//! (the in-process plan worker, say) is not the request's and logs without
//! it, as it did with the span.

use std::cell::RefCell;
use std::fmt;
use std::future::Future;

use http::{HeaderValue, Method, Uri};

tokio::task_local! {
    static CURRENT: Request;
}

/// One request's identity in the logs. Built from parts the request
/// already holds (cloning them shares their bytes), so a request that logs
/// nothing allocates nothing for it.
#[derive(Debug)]
pub struct Request {
    method: Method,
    uri: Uri,
    id: HeaderValue,
    org: RefCell<Option<Box<str>>>,
}

impl Request {
    pub fn new(method: Method, uri: Uri, id: HeaderValue) -> Self {
        Request {
            method,
            uri,
            id,
            org: RefCell::new(None),
        }
    }
}

/// Runs `work` as the handling of `request`: every line it writes says so.
pub async fn scope<F: Future>(request: Request, work: F) -> F::Output {
    CURRENT.scope(request, work).await
}

/// Records the organization the current request acts in, once the caller
/// is known. Outside a request it does nothing.
pub fn record_org(org: &str) {
    // `try_with` fails only outside a request: nothing to record then.
    let _ = CURRENT.try_with(|r| {
        if let Ok(mut slot) = r.org.try_borrow_mut() {
            *slot = Some(org.into());
        }
    });
}

/// Writes the current request as the members of a JSON object (no braces),
/// through `write`; returns `None` outside a request.
pub(crate) fn write_current(
    write: impl FnOnce(&Members<'_>) -> fmt::Result,
) -> Option<fmt::Result> {
    CURRENT
        .try_with(|r| {
            let org = r.org.try_borrow().ok();
            write(&Members {
                method: r.method.as_str(),
                path: r.uri.path(),
                // The API sets only visible ASCII ids; anything else is
                // written as a dash rather than guessed at.
                request_id: r.id.to_str().unwrap_or("-"),
                org: org.as_ref().and_then(|o| o.as_deref()),
            })
        })
        .ok()
}

/// The request's fields, borrowed for one line.
pub(crate) struct Members<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub request_id: &'a str,
    pub org: Option<&'a str>,
}
