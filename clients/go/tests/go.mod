module github.com/redis-ratelimit/redis-ratelimit/clients/go/tests

go 1.26.0

require (
	github.com/envoyproxy/go-control-plane/envoy v1.40.0
	github.com/gin-gonic/gin v1.12.0
	github.com/go-chi/chi/v5 v5.5.0
	github.com/go-redis/redis_rate/v10 v10.0.1
	github.com/redis-ratelimit/redis-ratelimit/clients/go v0.0.0
	github.com/redis-ratelimit/redis-ratelimit/clients/go/redis_rate v0.0.0
	github.com/redis-ratelimit/redis-ratelimit/clients/go/rlgoredis v0.0.0
	github.com/redis-ratelimit/redis-ratelimit/clients/go/rlrueidis v0.0.0-00010101000000-000000000000
	github.com/redis-ratelimit/redis-ratelimit/clients/go/rlvalkey v0.0.0-00010101000000-000000000000
	github.com/redis-ratelimit/redis-ratelimit/clients/go/ulule v0.0.0-00010101000000-000000000000
	github.com/redis/go-redis/v9 v9.23.0
	github.com/redis/rueidis v1.0.80
	github.com/ulule/limiter/v3 v3.11.2
	github.com/valkey-io/valkey-go v1.0.80
	github.com/valyala/fasthttp v1.79.0
	google.golang.org/grpc v1.85.0
)

require (
	github.com/bytedance/gopkg v0.1.3 // indirect
	github.com/bytedance/sonic v1.15.0 // indirect
	github.com/bytedance/sonic/loader v0.5.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/cloudwego/base64x v0.1.6 // indirect
	github.com/cncf/xds/go v0.0.0-20260202195803-dba9d589def2 // indirect
	github.com/envoyproxy/protoc-gen-validate v1.3.3 // indirect
	github.com/gabriel-vasile/mimetype v1.4.12 // indirect
	github.com/gin-contrib/sse v1.1.0 // indirect
	github.com/go-playground/locales v0.14.1 // indirect
	github.com/go-playground/universal-translator v0.18.1 // indirect
	github.com/go-playground/validator/v10 v10.30.1 // indirect
	github.com/goccy/go-json v0.10.5 // indirect
	github.com/goccy/go-yaml v1.19.2 // indirect
	github.com/json-iterator/go v1.1.12 // indirect
	github.com/klauspost/compress v1.20.4 // indirect
	github.com/klauspost/cpuid/v2 v2.4.0 // indirect
	github.com/leodido/go-urn v1.4.0 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	github.com/modern-go/concurrent v0.0.0-20180306012644-bacd9c7ef1dd // indirect
	github.com/modern-go/reflect2 v1.0.2 // indirect
	github.com/molecule-man/go-brrr v1.3.1 // indirect
	github.com/pelletier/go-toml/v2 v2.2.4 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/planetscale/vtprotobuf v0.6.1-0.20240319094008-0393e58bdf10 // indirect
	github.com/quic-go/qpack v0.6.0 // indirect
	github.com/quic-go/quic-go v0.59.0 // indirect
	github.com/twitchyliquid64/golang-asm v0.15.1 // indirect
	github.com/ugorji/go/codec v1.3.1 // indirect
	github.com/valyala/bytebufferpool v1.0.0 // indirect
	go.mongodb.org/mongo-driver/v2 v2.5.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/arch v0.22.0 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/text v0.44.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

replace (
	github.com/redis-ratelimit/redis-ratelimit/clients/go => ../
	github.com/redis-ratelimit/redis-ratelimit/clients/go/redis_rate => ../redis_rate
	github.com/redis-ratelimit/redis-ratelimit/clients/go/rlgoredis => ../rlgoredis
	github.com/redis-ratelimit/redis-ratelimit/clients/go/rlrueidis => ../rlrueidis
	github.com/redis-ratelimit/redis-ratelimit/clients/go/rlvalkey => ../rlvalkey
	github.com/redis-ratelimit/redis-ratelimit/clients/go/ulule => ../ulule
)
