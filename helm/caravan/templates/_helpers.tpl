{{/*
The release's name prefix for every object.
*/}}
{{- define "caravan.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/*
Labels every object carries.
*/}}
{{- define "caravan.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/part-of: caravan
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{/*
Selector labels of one component: (dict "root" $ "component" "eval-broker").
*/}}
{{- define "caravan.selector" -}}
app.kubernetes.io/name: caravan
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/*
The services the chart runs, by values key: the binary's name, its gRPC
port, whether it is leader-elected (its replicas campaign in etcd and it gets
a PodDisruptionBudget and a headless Service), and the ConfigMap key of its
config file.
*/}}
{{- define "caravan.services" -}}
apiGateway:
  name: api-gateway
  binary: caravan-api-gateway
  grpcPort: 4647
  leaderElected: false
evalBroker:
  name: eval-broker
  binary: caravan-eval-broker
  grpcPort: 4650
  leaderElected: true
planApplier:
  name: plan-applier
  binary: caravan-plan-applier
  grpcPort: 4651
  leaderElected: true
schedulerWorker:
  name: scheduler-worker
  binary: caravan-scheduler-worker
  grpcPort: 4652
  leaderElected: false
deploymentWatcher:
  name: deployment-watcher
  binary: caravan-deployment-watcher
  grpcPort: 4653
  leaderElected: true
{{- end -}}

{{/*
The etcd endpoints the services use: the bundled members by their stable
names, or etcd.external.endpoints.
*/}}
{{- define "caravan.etcdEndpoints" -}}
{{- $endpoints := list -}}
{{- $scheme := ternary "https" "http" (include "caravan.etcdTls" . | eq "true") -}}
{{- if .Values.etcd.enabled -}}
{{- $fullname := include "caravan.fullname" . -}}
{{- range $i := until (int .Values.etcd.replicaCount) -}}
{{- $endpoints = append $endpoints (printf "%s://%s-etcd-%d.%s-etcd-headless.%s.svc.%s:2379" $scheme $fullname $i $fullname $.Release.Namespace $.Values.clusterDomain) -}}
{{- end -}}
{{- else -}}
{{- if not .Values.etcd.external.endpoints -}}
{{- fail "etcd.enabled is false: set etcd.external.endpoints to the etcd the services use" -}}
{{- end -}}
{{- range .Values.etcd.external.endpoints -}}
{{- if ne (hasPrefix "https://" .) (eq $scheme "https") -}}
{{- fail (printf "etcd.external.endpoints: %s must be %s:// when etcd.tls.enabled is %v" . $scheme (eq $scheme "https")) -}}
{{- end -}}
{{- end -}}
{{- $endpoints = .Values.etcd.external.endpoints -}}
{{- end -}}
{{- toJson $endpoints -}}
{{- end -}}

{{/*
"true" when the services reach etcd over TLS (etcd.tls.enabled), which needs
etcd.tls.secretName.
*/}}
{{- define "caravan.etcdTls" -}}
{{- $tls := .Values.etcd.tls | default dict -}}
{{- if $tls.enabled -}}
{{- if not $tls.secretName -}}
{{- fail "etcd.tls.enabled: set etcd.tls.secretName to the Secret with ca.pem, client.pem and client-key.pem" -}}
{{- end -}}
true
{{- else -}}
false
{{- end -}}
{{- end -}}

{{/*
"true" when [tls] is on (tls.enabled), which needs tls.secretName.
*/}}
{{- define "caravan.tls" -}}
{{- $tls := .Values.tls | default dict -}}
{{- if $tls.enabled -}}
{{- if not $tls.secretName -}}
{{- fail "tls.enabled: set tls.secretName to the Secret with ca.pem, server.pem and server-key.pem" -}}
{{- end -}}
true
{{- else -}}
false
{{- end -}}
{{- end -}}

{{/*
Where a pod mounts the tls Secret and the etcd.tls Secret.
*/}}
{{- define "caravan.tlsDir" -}}/etc/caravan-tls{{- end -}}
{{- define "caravan.etcdTlsDir" -}}/etc/caravan-etcd-tls{{- end -}}

{{/*
One service's configuration as a map: what the chart decides (addresses,
the metrics listener, store and its TLS, tls, shutdown, telemetry) under the section's own `config` keys, which win.
(dict "root" $ "key" "evalBroker" "svc" <caravan.services entry>)
*/}}
{{- define "caravan.serviceConfig" -}}
{{- $root := .root -}}
{{- $config := dict "grpc_addr" (printf "0.0.0.0:%d" (int .svc.grpcPort)) -}}
{{- if eq .key "apiGateway" -}}
{{- $_ := set $config "http_addr" (printf "0.0.0.0:%d" (int (index $root.Values .key).service.httpPort)) -}}
{{- $_ := set $config "heartbeat_addr" (printf "0.0.0.0:%d" (int (index $root.Values .key).service.heartbeatPort)) -}}
{{- else -}}
{{- $_ := set $config "metrics_addr" (printf "0.0.0.0:%d" (int $root.Values.metrics.port)) -}}
{{- end -}}
{{- $store := dict
      "endpoints" (include "caravan.etcdEndpoints" $root | fromJsonArray)
      "prefix" $root.Values.store.prefix
      "connect_timeout_ms" $root.Values.store.connectTimeoutMs
      "request_timeout_ms" $root.Values.store.requestTimeoutMs -}}
{{- if eq (include "caravan.etcdTls" $root) "true" -}}
{{- $dir := include "caravan.etcdTlsDir" $root -}}
{{- $_ := set $store "ca_file" (printf "%s/ca.pem" $dir) -}}
{{- $_ := set $store "cert_file" (printf "%s/client.pem" $dir) -}}
{{- $_ := set $store "key_file" (printf "%s/client-key.pem" $dir) -}}
{{- $_ := set $store "tls_server_name" ($root.Values.etcd.tls.serverName | default "") -}}
{{- end -}}
{{- $_ := set $config "store" $store -}}
{{- if eq (include "caravan.tls" $root) "true" -}}
{{- $dir := include "caravan.tlsDir" $root -}}
{{- $_ := set $config "tls" (dict
      "enabled" true
      "ca_file" (printf "%s/ca.pem" $dir)
      "cert_file" (printf "%s/server.pem" $dir)
      "key_file" (printf "%s/server-key.pem" $dir)
      "region" ($root.Values.tls.region | default "global")) -}}
{{- end -}}
{{- $_ := set $config "shutdown" (dict "deadline_ms" $root.Values.shutdown.deadlineMs) -}}
{{- $_ := set $config "telemetry" (dict
      "log_filter" $root.Values.telemetry.logFilter
      "log_format" $root.Values.telemetry.logFormat
      "otlp_endpoint" $root.Values.telemetry.otlpEndpoint) -}}
{{- $config = mergeOverwrite $config (deepCopy ((index $root.Values .key).config | default dict)) -}}
{{- toJson $config -}}
{{- end -}}

{{/*
A map as TOML: its scalar and list keys, then each map key as a [table].
(dict "table" <map> "path" "prefix.of.this.table")
*/}}
{{- define "caravan.toml" -}}
{{- $path := .path -}}
{{- range $key, $value := .table -}}
{{- if and (not (kindIs "map" $value)) (not (kindIs "invalid" $value)) }}
{{ $key }} = {{ toJson $value }}
{{- end -}}
{{- end -}}
{{- range $key, $value := .table -}}
{{- if kindIs "map" $value -}}
{{- $name := ternary $key (printf "%s.%s" $path $key) (eq $path "") }}

[{{ $name }}]
{{- include "caravan.toml" (dict "table" $value "path" $name) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The image of a component.
*/}}
{{- define "caravan.image" -}}
{{- printf "%s/%s:%s" .root.Values.image.repository .name (toString .root.Values.image.tag) -}}
{{- end -}}


{{/*
A service's probe: Kubernetes' gRPC probe, or with [tls] the binary's own
`health` subcommand, which dials with the pod's certificate.
(dict "root" $ "svc" <caravan.services entry>)
*/}}
{{- define "caravan.probe" -}}
{{- if eq (include "caravan.tls" .root) "true" -}}
exec:
  command: [{{ .svc.binary | quote }}, "--config", "/etc/caravan/{{ .svc.name }}.toml", "health"]
# The subcommand gives up after 3 s.
timeoutSeconds: 4
{{- else -}}
grpc:
  port: {{ .svc.grpcPort }}
{{- end -}}
{{- end -}}

{{/*
"true" when a service runs inside the server pods (server.enabled and its
name in server.services) and so has no Deployment of its own.
(dict "root" $ "svc" <caravan.services entry>)
*/}}
{{- define "caravan.inServer" -}}
{{- $server := .root.Values.server | default dict -}}
{{- if and $server.enabled (has .svc.name ($server.services | default list)) -}}
true
{{- else -}}
false
{{- end -}}
{{- end -}}

{{/*
The server pods' configuration as a map: [store], [tls], [shutdown] and
[telemetry] once for the process, as every service would get them, and a
table per service it runs with its address, its metrics listener (only the
first service's: every listener of the process serves its one registry) and
its section's `config`, which wins.
*/}}
{{- define "caravan.serverConfig" -}}
{{- $root := . -}}
{{- $config := dict -}}
{{- range $key, $svc := include "caravan.services" $root | fromYaml -}}
{{- if eq (include "caravan.inServer" (dict "root" $root "svc" $svc)) "true" -}}
{{- $full := include "caravan.serviceConfig" (dict "root" $root "key" $key "svc" $svc) | fromJson -}}
{{- $metrics := "" -}}
{{- if not (hasKey $config "store") -}}
{{- $metrics = $full.metrics_addr -}}
{{- range $section := list "store" "tls" "shutdown" "telemetry" -}}
{{- if hasKey $full $section -}}
{{- $_ := set $config $section (index $full $section) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $table := dict "grpc_addr" $full.grpc_addr "metrics_addr" $metrics -}}
{{- $table = mergeOverwrite $table (deepCopy ((index $root.Values $key).config | default dict)) -}}
{{- $_ := set $config $svc.name $table -}}
{{- end -}}
{{- end -}}
{{- toJson $config -}}
{{- end -}}

{{/*
The server pods' probe: `caravan server -health` asks every service of the
process (Kubernetes' gRPC probe asks one port), with the pod's certificate
under TLS.
*/}}
{{- define "caravan.serverProbe" -}}
exec:
  command: ["caravan", "server", "-c", "/etc/caravan/server.toml", "-services", {{ join "," .Values.server.services | quote }}, "-health"]
# The check gives up after 3 s.
timeoutSeconds: 4
{{- end -}}

{{/*
The mounts and volumes of the tls and etcd.tls Secrets, for every Caravan
pod that has them on.
*/}}
{{- define "caravan.tlsMounts" -}}
{{- if eq (include "caravan.tls" .) "true" }}
- name: tls
  mountPath: {{ include "caravan.tlsDir" . }}
  readOnly: true
{{- end }}
{{- if eq (include "caravan.etcdTls" .) "true" }}
- name: etcd-tls
  mountPath: {{ include "caravan.etcdTlsDir" . }}
  readOnly: true
{{- end }}
{{- end -}}

{{- define "caravan.tlsVolumes" -}}
{{- if eq (include "caravan.tls" .) "true" }}
- name: tls
  secret:
    secretName: {{ .Values.tls.secretName }}
    # Keys readable by the pod's group (fsGroup) only.
    defaultMode: 0440
{{- end }}
{{- if eq (include "caravan.etcdTls" .) "true" }}
- name: etcd-tls
  secret:
    secretName: {{ .Values.etcd.tls.secretName }}
    defaultMode: 0440
{{- end }}
{{- end -}}
