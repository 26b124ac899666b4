module github.com/xds-sansio/interop-v2

go 1.26.0

require (
	github.com/envoyproxy/go-control-plane v0.9.7
	github.com/golang/protobuf v1.4.2
	google.golang.org/grpc v1.27.0
)

require (
	github.com/census-instrumentation/opencensus-proto v0.2.1 // indirect
	github.com/cncf/udpa/go v0.0.0-20200629203442-efcf912fb354 // indirect
	github.com/envoyproxy/protoc-gen-validate v0.1.0 // indirect
	golang.org/x/net v0.0.0-20190311183353-d8887717615a // indirect
	golang.org/x/sys v0.0.0-20190215142949-d0b11bdaac8a // indirect
	golang.org/x/text v0.3.0 // indirect
	google.golang.org/genproto v0.0.0-20190819201941-24fa4b261c55 // indirect
	google.golang.org/protobuf v1.23.0 // indirect
)
