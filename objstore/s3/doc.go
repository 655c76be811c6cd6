// Package s3 is the objstore backend for Amazon S3 and S3-compatible services (MinIO,
// Cloudflare R2, Ceph RGW, ...), on aws-sdk-go-v2.
//
// # Configuration
//
// A Config names the bucket and an optional key prefix; everything else has a default
// or comes from the AWS SDK's usual sources. ConfigFromURI builds one from a store URI:
//
//	s3://bucket/prefix?region=R&endpoint=URL&path_style=true&profile=P
//
// with these fallbacks when a parameter is absent:
//
//	region      LANCECTX_S3_REGION, then (in New) AWS_REGION, AWS_DEFAULT_REGION,
//	            the profile's region, then us-east-1
//	endpoint    LANCECTX_S3_ENDPOINT, AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, then AWS
//	path_style  LANCECTX_S3_PATH_STYLE, then false (virtual-hosted addressing)
//	credentials never in the URI: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/
//	            AWS_SESSION_TOKEN, AWS_PROFILE and the shared config files (SSO too),
//	            web identity (EKS IRSA), ECS task role, EC2 instance role (IMDS)
//
// Examples:
//
//	# AWS: region and credentials from the environment or the instance role
//	s3://my-bucket/lancectx
//	s3://my-bucket/lancectx?region=eu-west-1
//
//	# MinIO: path-style addressing on a plain-HTTP endpoint
//	AWS_ACCESS_KEY_ID=minioadmin AWS_SECRET_ACCESS_KEY=minioadmin \
//	s3://lancectx/data?endpoint=http://minio:9000&path_style=true
//
//	# Cloudflare R2: region "auto"; path style works (and so does virtual-hosted)
//	s3://my-bucket/lancectx?endpoint=https://ACCOUNT_ID.r2.cloudflarestorage.com&region=auto&path_style=true
//
// Config's own fields (MaxBatchDelete, DeleteConcurrency, PartSize, UploadConcurrency,
// HTTPClient) tune batch deletes and uploads; see their comments.
//
// # Behaviour
//
// The SDK's retries are off: the store makes one attempt per request and maps its
// failures to objstore sentinels (404 NoSuchKey: ErrNotFound; 412 on a conditional
// create: ErrExists; 429 and 503: ErrThrottled; 500, 502, 504, RequestTimeout, 409
// ConditionalRequestConflict, resets and timeouts: ErrTransient), keeping the SDK
// error in the chain, so the objstore retry wrapper above every backend is the one
// place that retries. PutIfAbsent is a PutObject with If-None-Match: *, Copy a
// server-side CopyObject, DeleteBatch parallel DeleteObjects requests.
//
// Permissions: s3:GetObject, s3:PutObject, s3:DeleteObject, s3:AbortMultipartUpload
// and s3:ListBucket. Without s3:ListBucket, S3 answers a missing key with 403 rather
// than 404, and ErrNotFound (on which Lance commits depend) turns into an access error.
// A lifecycle rule that aborts incomplete multipart uploads after a day collects the
// parts of uploads whose abort failed (a crash mid-Put, say).
package s3
