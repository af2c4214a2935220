module github.com/redis-ratelimit/redis-ratelimit/clients/go/rlrueidis

go 1.26.0

require (
	github.com/redis-ratelimit/redis-ratelimit/clients/go v0.0.0
	github.com/redis/rueidis v1.0.80
)

require golang.org/x/sys v0.50.0 // indirect

replace github.com/redis-ratelimit/redis-ratelimit/clients/go => ../
