"""Deployment: nginx in front of app replicas, a container image, compose and Kubernetes manifests."""
