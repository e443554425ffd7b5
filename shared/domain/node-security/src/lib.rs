//! What secures one deployment's cluster: its own certificate authority, a
//! certificate every node presents (transport and HTTP), and the `elastic`
//! superuser's password, made once when the deployment is created.
//!
//! Elasticsearch 8 turns security on by default and then refuses to form a
//! multi-node cluster without transport TLS; the package's own
//! auto-configuration makes a CA per node, which nodes of one cluster do not
//! share. So Floe makes the CA: every node of the deployment trusts it, and
//! so do the functions, which reach a node at its private address and check
//! its certificate against this CA and [`server_name`] (the certificate's
//! only name, since addresses are unknown when it is made).
//!
//! One certificate for all nodes keeps the plan simple: nodes come and go
//! with every resize, and a node only has to prove it belongs to the
//! deployment (transport verification mode `certificate`). Its validity is
//! rcgen's default (1975 to 4096): the CA lives as long as the deployment.

use floe_domain::secret::SecretString;
use rand::Rng;
use rand::distr::Alphanumeric;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// Length of the generated `elastic` password (alphanumeric: it travels in
/// a shell pipe and a Basic auth header without escaping).
pub const PASSWORD_LEN: usize = 32;
/// The built-in superuser the control plane authenticates as.
pub const ELASTIC_USER: &str = floe_domain::access::ELASTIC_USER;

#[derive(Debug, thiserror::Error)]
#[error("the deployment's certificates could not be made: {0}")]
pub struct SecurityError(String);

impl From<rcgen::Error> for SecurityError {
    fn from(e: rcgen::Error) -> SecurityError {
        SecurityError(e.to_string())
    }
}

/// Everything the nodes of one deployment share. `Debug` shows no secret.
#[derive(Debug, Clone)]
pub struct ClusterSecurity {
    /// The deployment's CA certificate (PEM): public.
    pub ca_cert_pem: String,
    /// Its key (PKCS#8 PEM): kept for the deployment's nodes, which sign
    /// their own HTTP certificates with it ([`node_http_certificate`]).
    pub ca_key_pem: SecretString,
    /// The nodes' certificate (PEM), signed by the CA, for [`server_name`].
    pub node_cert_pem: String,
    /// Its private key (PKCS#8 PEM).
    pub node_key_pem: SecretString,
    /// The `elastic` user's password (`bootstrap.password`).
    pub elastic_password: SecretString,
}

/// The name on the nodes' certificate, and the host name the functions
/// connect to (resolved to a node's private address).
pub fn server_name(deployment_id: &str) -> String {
    floe_domain::access::server_name(deployment_id)
}

/// A new random `elastic` password.
pub fn new_password() -> SecretString {
    SecretString::new(
        rand::rng()
            .sample_iter(Alphanumeric)
            .take(PASSWORD_LEN)
            .map(char::from)
            .collect::<String>(),
    )
}

/// A new CA, node certificate and password for `deployment_id`, without a
/// stable endpoint (the certificate names [`server_name`] alone).
pub fn generate(deployment_id: &str) -> Result<ClusterSecurity, SecurityError> {
    generate_with(deployment_id, new_password(), None)
}

/// A new CA and node certificate for `deployment_id`, with the password the
/// deployment's create already handed to its owner. The certificate names
/// [`server_name`] and, when the deployment has one, its stable endpoint's
/// host (`endpoint`): a DNS name, or an address, which it names as an IP
/// address, so that any verifying client connects with the CA alone.
pub fn generate_with(
    deployment_id: &str,
    elastic_password: SecretString,
    endpoint: Option<&str>,
) -> Result<ClusterSecurity, SecurityError> {
    let ca_key = KeyPair::generate()?;
    let ca_key_pem = SecretString::new(ca_key.serialize_pem());
    let ca = ca_params(deployment_id, HttpCa::Deployment)?;
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca, ca_key);

    let node_key = KeyPair::generate()?;
    let mut names = vec![server_name(deployment_id)];
    names.extend(endpoint.map(str::to_string));
    // Transport connections are mutual: a node is server and client.
    let node = node_params(deployment_id, names, true)?;
    let node_cert = node.signed_by(&node_key, &issuer)?;

    Ok(ClusterSecurity {
        ca_cert_pem: ca_cert.pem(),
        ca_key_pem,
        node_cert_pem: node_cert.pem(),
        node_key_pem: SecretString::new(node_key.serialize_pem()),
        elastic_password,
    })
}

/// Which CA signs a deployment's nodes' HTTP certificates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpCa {
    /// The CA made at its create, which signs the transport certificate
    /// too.
    Deployment,
    /// A CA for HTTP alone ([`generate_http_ca`]), made when a deployment
    /// created before Floe kept its CA key moves to a stable endpoint: a
    /// certificate naming the endpoint needs a CA key, and the transport
    /// layer keeps the old CA, which the nodes still running trust.
    Own,
}

/// A CA for the HTTP layer of `deployment_id` alone, with its key (see
/// [`HttpCa::Own`]). Its subject differs from the deployment CA's, so a
/// client trusting both finds the right issuer by name.
pub fn generate_http_ca(deployment_id: &str) -> Result<(String, SecretString), SecurityError> {
    let key = KeyPair::generate()?;
    let cert = ca_params(deployment_id, HttpCa::Own)?.self_signed(&key)?;
    Ok((cert.pem(), SecretString::new(key.serialize_pem())))
}

/// The first certificate (PEM block) of `bundle`, when it has one.
pub fn first_certificate(bundle: &str) -> Option<&str> {
    const END: &str = "-----END CERTIFICATE-----";
    let start = bundle.find("-----BEGIN CERTIFICATE-----")?;
    let end = bundle[start..].find(END)? + start + END.len();
    Some(&bundle[start..end])
}

/// A deployment's CA as it was made: the same subject and constraints, so
/// that a certificate signed again with its key chains to it.
fn ca_params(deployment_id: &str, which: HttpCa) -> Result<CertificateParams, SecurityError> {
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    let name = match which {
        HttpCa::Deployment => format!("Floe CA {deployment_id}"),
        HttpCa::Own => format!("Floe HTTP CA {deployment_id}"),
    };
    ca.distinguished_name.push(DnType::CommonName, name);
    ca.distinguished_name.push(DnType::OrganizationName, "Floe");
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    Ok(ca)
}

/// A node certificate for `names` (DNS names or addresses), in the
/// deployment's name; for clients too when `client` (transport).
fn node_params(
    deployment_id: &str,
    names: Vec<String>,
    client: bool,
) -> Result<CertificateParams, SecurityError> {
    let mut node = CertificateParams::new(names)?;
    node.distinguished_name
        .push(DnType::CommonName, server_name(deployment_id));
    node.is_ca = IsCa::ExplicitNoCa;
    node.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyAgreement,
    ];
    node.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    if client {
        node.extended_key_usages
            .push(ExtendedKeyUsagePurpose::ClientAuth);
    }
    Ok(node)
}

/// A node's own HTTP certificate, signed with the deployment's CA key:
/// it names [`server_name`], the stable endpoint's host when there is one,
/// and the node's addresses, so that a client reaching the node at an
/// address `_nodes/http` published verifies it. What a node's boot script
/// makes with openssl; local mode's simulated nodes make theirs here.
pub fn node_http_certificate(
    deployment_id: &str,
    ca: HttpCa,
    ca_key_pem: &SecretString,
    endpoint: Option<&str>,
    addresses: &[std::net::IpAddr],
) -> Result<(String, SecretString), SecurityError> {
    let ca_key = KeyPair::from_pem(ca_key_pem.expose())?;
    let issuer = Issuer::new(ca_params(deployment_id, ca)?, ca_key);
    let mut names = vec![server_name(deployment_id)];
    names.extend(endpoint.map(str::to_string));
    names.extend(addresses.iter().map(ToString::to_string));
    names.dedup();
    let key = KeyPair::generate()?;
    let cert = node_params(deployment_id, names, false)?.signed_by(&key, &issuer)?;
    Ok((cert.pem(), SecretString::new(key.serialize_pem())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;

    fn der(pem: &str, label: &str) -> Vec<u8> {
        let body: String = pem
            .lines()
            .skip_while(|l| *l != format!("-----BEGIN {label}-----"))
            .skip(1)
            .take_while(|l| !l.starts_with("-----END"))
            .collect();
        base64::engine::general_purpose::STANDARD
            .decode(body)
            .unwrap_or_default()
    }

    fn contains(haystack: &[u8], needle: &[u8]) -> bool {
        haystack.windows(needle.len()).any(|w| w == needle)
    }

    #[test]
    fn the_node_certificate_names_the_deployment_and_its_issuer() -> Result<(), SecurityError> {
        let s = generate("0123456789abcdef0123456789abcdef")?;
        let ca = der(&s.ca_cert_pem, "CERTIFICATE");
        let node = der(&s.node_cert_pem, "CERTIFICATE");
        let key = der(s.node_key_pem.expose(), "PRIVATE KEY");
        assert!(!ca.is_empty() && !node.is_empty() && !key.is_empty());
        let name = server_name("0123456789abcdef0123456789abcdef");
        assert!(contains(&node, name.as_bytes()), "the SAN and CN");
        assert!(
            contains(&node, b"Floe CA 0123456789abcdef0123456789abcdef"),
            "the issuer"
        );
        assert!(!contains(&ca, name.as_bytes()));
        assert_eq!(s.elastic_password.expose().len(), PASSWORD_LEN);
        assert!(
            s.elastic_password
                .expose()
                .chars()
                .all(|c| c.is_ascii_alphanumeric())
        );
        Ok(())
    }

    #[test]
    fn the_node_certificate_names_the_stable_endpoint_too() -> Result<(), SecurityError> {
        let id = "0123456789abcdef0123456789abcdef";
        let by_name = generate_with(id, new_password(), Some("d1.es.floe.internal"))?;
        let node = der(&by_name.node_cert_pem, "CERTIFICATE");
        assert!(contains(&node, b"d1.es.floe.internal"));
        assert!(contains(&node, server_name(id).as_bytes()));
        // An address is named as an IP address: context tag 7, 4 octets.
        let by_address = generate_with(id, new_password(), Some("127.200.3.4"))?;
        let node = der(&by_address.node_cert_pem, "CERTIFICATE");
        assert!(contains(&node, &[0x87, 4, 127, 200, 3, 4]));
        assert!(!contains(&node, b"127.200.3.4"));
        Ok(())
    }

    /// A node's own certificate is signed by the deployment's CA and names
    /// the node's address; it verifies as the CA's, with the address.
    #[test]
    fn a_node_signs_its_own_http_certificate_with_the_kept_ca_key() -> Result<(), SecurityError> {
        let id = "0123456789abcdef0123456789abcdef";
        let s = generate_with(id, new_password(), Some("d1.es.floe.internal"))?;
        let ip: std::net::IpAddr = [10, 0, 1, 7].into();
        let (cert, key) = node_http_certificate(
            id,
            HttpCa::Deployment,
            &s.ca_key_pem,
            Some("d1.es.floe.internal"),
            &[ip],
        )?;
        let der_cert = der(&cert, "CERTIFICATE");
        assert!(contains(&der_cert, &[0x87, 4, 10, 0, 1, 7]), "the IP SAN");
        assert!(contains(&der_cert, b"d1.es.floe.internal"));
        assert!(contains(
            &der_cert,
            b"Floe CA 0123456789abcdef0123456789abcdef"
        ));
        assert!(!key.expose().is_empty());
        // Another deployment's key signs nothing this CA vouches for.
        let other = generate("other")?;
        let (foreign, _) =
            node_http_certificate(id, HttpCa::Deployment, &other.ca_key_pem, None, &[ip])?;
        assert_ne!(foreign, cert);
        Ok(())
    }

    #[test]
    fn every_deployment_gets_its_own() -> Result<(), SecurityError> {
        let a = generate("a")?;
        let b = generate("a")?;
        assert_ne!(a.ca_cert_pem, b.ca_cert_pem);
        assert_ne!(a.node_key_pem.expose(), b.node_key_pem.expose());
        assert_ne!(a.elastic_password.expose(), b.elastic_password.expose());
        assert!(!format!("{a:?}").contains(a.elastic_password.expose()));
        assert!(!format!("{a:?}").contains(a.node_key_pem.expose()));
        Ok(())
    }
}
