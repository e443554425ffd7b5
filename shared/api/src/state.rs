use floe_auth::Verifier;
use floe_domain::repository::EndpointPolicy;
use floe_secrets::Cipher;
use floe_store::Store;
use std::sync::Arc;

/// What every handler may use; built once per process (per cold start on Lambda).
#[derive(Clone)]
pub struct AppState {
    pub store: Store,
    pub cipher: Arc<dyn Cipher>,
    pub verifier: Arc<Verifier>,
    pub endpoint_policy: EndpointPolicy,
}
