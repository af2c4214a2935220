module github.com/redis-ratelimit/redis-ratelimit/clients/go/tests

go 1.26.0

require (
	github.com/go-redis/redis_rate/v10 v10.0.1
	github.com/redis-ratelimit/redis-ratelimit/clients/go/redis_rate v0.0.0
	github.com/redis/go-redis/v9 v9.23.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/redis-ratelimit/redis-ratelimit/clients/go v0.0.0 // indirect
	github.com/redis-ratelimit/redis-ratelimit/clients/go/rlgoredis v0.0.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/sys v0.50.0 // indirect
)

replace (
	github.com/redis-ratelimit/redis-ratelimit/clients/go => ../
	github.com/redis-ratelimit/redis-ratelimit/clients/go/redis_rate => ../redis_rate
	github.com/redis-ratelimit/redis-ratelimit/clients/go/rlgoredis => ../rlgoredis
	github.com/redis-ratelimit/redis-ratelimit/clients/go/rlrueidis => ../rlrueidis
	github.com/redis-ratelimit/redis-ratelimit/clients/go/rlvalkey => ../rlvalkey
)
