package acp

// Data and file parts as ACP content blocks (ContentBlock types
// resource_link, resource, image, audio), in an agent_message_chunk.
//
//   - A file by URL is a resource_link: its uri, name (the file's name, else
//     the URL's last path segment) and mimeType. The client fetches it if it
//     wants to; nothing is copied.
//   - A file's bytes are an image (image/*) or audio (audio/*) block, which
//     ACP carries as base64 data with a mimeType, as A2A does; any other
//     file's bytes an embedded resource: text contents when its mimeType is
//     textual (text/*, JSON, XML, YAML) and the bytes are UTF-8, else blob
//     contents (base64). An embedded resource needs a uri and the bytes have
//     none, so it is named urn:e2a:file:<name> (a name, not an address).
//   - A data part (other than the tool calls, tool responses and plans
//     mapped to their own updates) is an embedded resource of text contents,
//     mimeType application/json, uri urn:e2a:data[:<type>]. A resource
//     rather than the JSON as message text: the agent's prose stays prose
//     (a client concatenates agent_message_chunk texts), and the JSON stays
//     machine-readable, marked by its mimeType, as A2A's DataPart is.

import (
	"encoding/base64"
	"encoding/json"
	"mime"
	"net/url"
	"path"
	"strings"
	"unicode/utf8"

	acpsdk "github.com/coder/acp-go-sdk"
)

// URN prefixes of embedded resources made from parts without a URI.
const (
	fileURN = "urn:e2a:file:"
	dataURN = "urn:e2a:data"
)

// fileUpdate maps an A2A file part's file object (v0.3 JSON: bytes or
// uri, mimeType, name) to an agent_message_chunk; ok is false for a file
// with neither bytes nor a URI.
func fileUpdate(f map[string]any) (acpsdk.SessionUpdate, bool) {
	name, _ := f["name"].(string)
	mt, _ := f["mimeType"].(string)
	if uri, _ := f["uri"].(string); uri != "" {
		if name == "" {
			name = uriName(uri)
		}
		b := acpsdk.ResourceLinkBlock(name, uri)
		if mt != "" {
			b.ResourceLink.MimeType = &mt
		}
		return acpsdk.UpdateAgentMessage(b), true
	}
	data, _ := f["bytes"].(string)
	if data == "" {
		return acpsdk.SessionUpdate{}, false
	}
	media, _, _ := mime.ParseMediaType(mt)
	switch {
	case strings.HasPrefix(media, "image/"):
		return acpsdk.UpdateAgentMessage(acpsdk.ImageBlock(data, mt)), true
	case strings.HasPrefix(media, "audio/"):
		return acpsdk.UpdateAgentMessage(acpsdk.AudioBlock(data, mt)), true
	}
	if name == "" {
		name = "file"
	}
	uri := fileURN + url.PathEscape(name)
	var mtp *string
	if mt != "" {
		mtp = &mt
	}
	if textual(media) {
		if raw, err := base64.StdEncoding.DecodeString(data); err == nil && utf8.Valid(raw) {
			return acpsdk.UpdateAgentMessage(acpsdk.ResourceBlock(acpsdk.EmbeddedResourceResource{
				TextResourceContents: &acpsdk.TextResourceContents{Uri: uri, MimeType: mtp, Text: string(raw)}})), true
		}
	}
	return acpsdk.UpdateAgentMessage(acpsdk.ResourceBlock(acpsdk.EmbeddedResourceResource{
		BlobResourceContents: &acpsdk.BlobResourceContents{Uri: uri, MimeType: mtp, Blob: data}})), true
}

// dataUpdate maps a data part's object (typ: its part type, if any) to an
// agent_message_chunk of an embedded JSON resource.
func dataUpdate(data any, typ string) (acpsdk.SessionUpdate, bool) {
	b, err := json.Marshal(data)
	if err != nil {
		return acpsdk.SessionUpdate{}, false
	}
	uri := dataURN
	if typ != "" {
		uri += ":" + url.PathEscape(typ)
	}
	mt := "application/json"
	return acpsdk.UpdateAgentMessage(acpsdk.ResourceBlock(acpsdk.EmbeddedResourceResource{
		TextResourceContents: &acpsdk.TextResourceContents{Uri: uri, MimeType: &mt, Text: string(b)}})), true
}

// textual reports a media type whose bytes are text.
func textual(media string) bool {
	switch {
	case strings.HasPrefix(media, "text/"), media == "application/json", media == "application/xml",
		media == "application/yaml", media == "application/x-yaml",
		strings.HasSuffix(media, "+json"), strings.HasSuffix(media, "+xml"):
		return true
	}
	return false
}

// uriName is the last path segment of uri ("file" when it has none).
func uriName(uri string) string {
	if u, err := url.Parse(uri); err == nil {
		if base := path.Base(u.Path); base != "." && base != "/" && base != "" {
			if n, err := url.PathUnescape(base); err == nil {
				return n
			}
			return base
		}
	}
	return "file"
}
