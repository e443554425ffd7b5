use floe_app::App;
use floe_auth::Verifier;
use std::sync::Arc;

/// What the router holds: the use cases and the token verifier. Built once
/// per process (per cold start on Lambda).
#[derive(Clone)]
pub struct ApiState {
    pub app: Arc<App>,
    pub verifier: Arc<Verifier>,
}

impl ApiState {
    pub fn new(app: App, verifier: Arc<Verifier>) -> ApiState {
        ApiState {
            app: Arc::new(app),
            verifier,
        }
    }
}
