module github.com/redis-ratelimit/redis-ratelimit/clients/go/envoy

go 1.26.0

replace github.com/redis-ratelimit/redis-ratelimit/clients/go => ../

replace github.com/redis-ratelimit/redis-ratelimit/clients/go/rlrueidis => ../rlrueidis

require (
	github.com/envoyproxy/go-control-plane/envoy v1.40.0
	github.com/redis-ratelimit/redis-ratelimit/clients/go v0.0.0
	github.com/redis-ratelimit/redis-ratelimit/clients/go/rlrueidis v0.0.0
	github.com/redis/rueidis v1.0.80
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
	gopkg.in/yaml.v2 v2.4.0
)

require (
	github.com/cncf/xds/go v0.0.0-20260202195803-dba9d589def2 // indirect
	github.com/envoyproxy/protoc-gen-validate v1.3.3 // indirect
	github.com/kr/pretty v0.3.1 // indirect
	github.com/planetscale/vtprotobuf v0.6.1-0.20240319094008-0393e58bdf10 // indirect
	github.com/rogpeppe/go-internal v1.12.0 // indirect
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/text v0.44.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1 // indirect
	gopkg.in/check.v1 v1.0.0-20201130134442-10cb98267c6c // indirect
)
