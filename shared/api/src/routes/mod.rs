//! The API's operations, one module per resource. Each module declares its
//! operations once, with [`operations!`], which gives both of their uses.

/// Declares a module's operations, grouped by path, and defines from that
/// one list:
/// - `router()`: the operations with their OpenAPI entries, from which the
///   document is collected (`floe-local openapi`, the drift test);
/// - `serve(router)`: the routes the process answers, taken from each
///   handler's documented path and methods only, so that a cold start
///   builds no part of the document it serves as committed.
macro_rules! operations {
    ($([$($handler:ident),+ $(,)?]),+ $(,)?) => {
        pub fn router() -> utoipa_axum::router::OpenApiRouter<crate::ApiState> {
            utoipa_axum::router::OpenApiRouter::new()
                $(.routes(utoipa_axum::routes!($($handler),+)))+
        }

        pub fn serve(
            mut router: axum::Router<crate::ApiState>,
        ) -> axum::Router<crate::ApiState> {
            use utoipa_axum::PathItemExt as _;
            utoipa_axum::paste! {
                $($(
                    let methods = <[<__path_ $handler>] as utoipa::Path>::methods();
                    let handler = methods.iter().fold(
                        axum::routing::MethodRouter::new(),
                        |each, method| each.on(method.to_method_filter(), $handler),
                    );
                    router = router.route(
                        &<[<__path_ $handler>] as utoipa::Path>::path(),
                        handler,
                    );
                )+)+
            }
            router
        }
    };
}

pub mod api_keys;
pub mod deployments;
pub mod drills;
pub mod license;
pub mod plans;
pub mod platform;
pub mod policies;
pub mod proxy;
pub mod repositories;
pub mod restore;
pub mod snapshots;
