package oauth

import (
	"slices"
	"strings"
)

// ResourceMetadata is the part of an OAuth 2.0 Protected Resource Metadata
// document (RFC 9728 §2) an MCP client reads.
type ResourceMetadata struct {
	Resource                      string   `json:"resource"`
	AuthorizationServers          []string `json:"authorization_servers"`
	ScopesSupported               []string `json:"scopes_supported"`
	BearerMethodsSupported        []string `json:"bearer_methods_supported"`
	DPoPSigningAlgValuesSupported []string `json:"dpop_signing_alg_values_supported"`
	DPoPBoundAccessTokensRequired bool     `json:"dpop_bound_access_tokens_required"`
	ResourceName                  string   `json:"resource_name"`
}

// ServerMetadata is the part of an authorization server's metadata
// (RFC 8414 §2, OpenID Connect Discovery 1.0 §3) an MCP client reads.
type ServerMetadata struct {
	Issuer                                     string   `json:"issuer"`
	AuthorizationEndpoint                      string   `json:"authorization_endpoint"`
	TokenEndpoint                              string   `json:"token_endpoint"`
	RegistrationEndpoint                       string   `json:"registration_endpoint"`
	RevocationEndpoint                         string   `json:"revocation_endpoint"`
	ScopesSupported                            []string `json:"scopes_supported"`
	ResponseTypesSupported                     []string `json:"response_types_supported"`
	GrantTypesSupported                        []string `json:"grant_types_supported"`
	CodeChallengeMethodsSupported              []string `json:"code_challenge_methods_supported"`
	TokenEndpointAuthMethodsSupported          []string `json:"token_endpoint_auth_methods_supported"`
	TokenEndpointAuthSigningAlgValuesSupported []string `json:"token_endpoint_auth_signing_alg_values_supported"`
	RevocationEndpointAuthMethodsSupported     []string `json:"revocation_endpoint_auth_methods_supported"`
	DPoPSigningAlgValuesSupported              []string `json:"dpop_signing_alg_values_supported"`
	// AuthorizationResponseIssParameterSupported: the server sends iss
	// in its authorization responses (RFC 9207 §3).
	AuthorizationResponseIssParameterSupported bool `json:"authorization_response_iss_parameter_supported"`
	// ClientIDMetadataDocumentSupported: the server accepts an HTTPS URL
	// as client_id (draft-ietf-oauth-client-id-metadata-document).
	ClientIDMetadataDocumentSupported bool `json:"client_id_metadata_document_supported"`
}

// The token endpoint authentication methods (RFC 7591 §2, RFC 7523 §2.2).
const (
	AuthNone              = "none"
	AuthClientSecretBasic = "client_secret_basic"
	AuthClientSecretPost  = "client_secret_post"
	AuthPrivateKeyJWT     = "private_key_jwt"
)

// supportsAuth reports whether the server lists method among its token
// endpoint authentication methods. An absent list means
// client_secret_basic only (RFC 8414 §2).
func (m *ServerMetadata) supportsAuth(method string) bool {
	if len(m.TokenEndpointAuthMethodsSupported) == 0 {
		return method == AuthClientSecretBasic
	}
	return slices.Contains(m.TokenEndpointAuthMethodsSupported, method)
}

// supportsScope reports whether the server lists scope in scopes_supported.
func (m *ServerMetadata) supportsScope(scope string) bool {
	return slices.Contains(m.ScopesSupported, scope)
}

// supportsDPoP reports whether the server signs DPoP-bound tokens for
// proofs made with alg (RFC 9449 §5.1).
func (m *ServerMetadata) supportsDPoP(alg string) bool {
	return slices.Contains(m.DPoPSigningAlgValuesSupported, alg)
}

// pkceS256 reports whether the server supports PKCE with S256. MCP
// clients must refuse a server whose metadata does not say so (MCP
// authorization, security considerations: authorization code protection).
func (m *ServerMetadata) pkceS256() bool {
	return slices.Contains(m.CodeChallengeMethodsSupported, "S256")
}

// unionScopes returns the scopes of a followed by those of b not in a, in
// order, without duplicates.
func unionScopes(a, b []string) []string {
	out := make([]string, 0, len(a)+len(b))
	for _, s := range append(slices.Clone(a), b...) {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// joinScopes is the scope parameter of a scope list.
func joinScopes(scopes []string) string { return strings.Join(scopes, " ") }
