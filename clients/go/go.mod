module github.com/redis-ratelimit/redis-ratelimit/clients/go

go 1.23
